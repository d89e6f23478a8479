"""Answer sets: sampling, clustering, the two-stage calibration and its saved result."""
