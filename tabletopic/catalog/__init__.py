"""Iceberg catalog adapters (REST, Hive, Glue, SQL) and the built-in REST catalog server."""
