"""Broker security: TLS listeners, SASL (PLAIN, SCRAM-SHA-256/512) with credentials salted in the
metadata database, and the Kafka APIs that manage them.

Everything here is reached from the connection through small hooks (``server.KafkaConnection``
asks a :class:`~tabletopic.broker.security.listener.ListenerSecurity` for its authenticator and TLS
context); nothing here imports the server.
"""
