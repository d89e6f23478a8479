"""The offline stack: bundled SQuAD data, MiniLM, Chroma, BM25, the local Gemma model and demo builders."""
