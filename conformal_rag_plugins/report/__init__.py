"""The calibration report: numbers, figures and the HTML page from saved calibrations."""
