"""The offline stack: bundled SQuAD data, MiniLM embeddings, Chroma, BM25 and the local Gemma model, with demo builders for both frameworks."""
