"""twinlake.sim"""
