"""Calibration examples, the corpus format and the question-file reader."""
