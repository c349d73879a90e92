"""twinlake.fit"""
