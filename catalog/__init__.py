"""twinlake.catalog"""
