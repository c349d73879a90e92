"""twinlake.daemon"""
