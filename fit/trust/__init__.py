"""twinlake.fit.trust: see README.md beside this file."""
