"""End-to-end workflows behind the ``conformal-rag`` command."""
