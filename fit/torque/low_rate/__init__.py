"""Robot state below 200 Hz: the quasi-static route (rows at rest) and its fit record."""
