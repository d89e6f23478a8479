"""Host tuning: the fusion and unit settings chosen on a split of the calibration questions."""
