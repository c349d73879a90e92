"""twinlake.fit.replay: see README.md beside this file."""
