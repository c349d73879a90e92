"""twinlake.fit.reports: see README.md beside this file."""
