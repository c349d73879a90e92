"""twinlake.fit.core: see README.md beside this file."""
