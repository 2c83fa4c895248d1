"""tabletopic: a Kafka-compatible streaming platform on object storage whose topics land in Iceberg."""

__version__ = "0.1.0"
