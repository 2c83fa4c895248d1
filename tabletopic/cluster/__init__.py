"""Cluster mode: brokers sharing one PostgreSQL metadata database and one object store.

Membership (node leases on the database's clock), the controller lease and its decisions
(partition leadership with leader epochs), and wake-ups through PostgreSQL LISTEN/NOTIFY. The
package knows no Kafka: partitions are ``(topic, partition)`` keys handed in by the broker, which
owns what leading a partition means (opening its streams with the leader epoch). See
``docs/cluster.md``.
"""
