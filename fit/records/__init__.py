"""twinlake.fit.records: see README.md beside this file."""
