"""Admin HTTP API, Prometheus metrics, and the helpers every HTTP service of a node shares."""
