"""The SQL of the catalog, as .sql files loaded by twinlake.catalog."""
