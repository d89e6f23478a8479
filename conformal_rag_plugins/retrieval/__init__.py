"""Retrieval calibration: the conformalizer, its saved result, fingerprints and served-pool checks."""
