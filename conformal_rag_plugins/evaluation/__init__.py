"""Evaluation by repeated random splits: held-out coverage and set sizes."""
