"""A schema registry with Confluent's REST API (Avro, JSON Schema, Protobuf)."""
