"""twinlake.ingest"""
