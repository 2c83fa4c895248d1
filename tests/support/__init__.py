"""Launchers for the real servers tests and benches run against (SeaweedFS, PostgreSQL, ...)."""
