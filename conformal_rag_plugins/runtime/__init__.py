"""Small runtime pieces every layer may use: paths, retries, caches, atomic writes (no other library import)."""
