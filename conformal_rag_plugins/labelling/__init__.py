"""Labels without a human: LLM question generation and LLM-judge labelling (CONFLARE)."""
