"""Framework-free conformal statistics on numpy (rouge-score and scikit-optimize imported lazily)."""
