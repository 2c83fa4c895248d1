"""Cluster mode: brokers sharing one object store and one metadata database."""
