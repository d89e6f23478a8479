"""Saved files: JSON with a schema version, checksums and signatures, validated on load."""
