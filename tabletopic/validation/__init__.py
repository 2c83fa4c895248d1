"""Produce-time record validation: the broker's :class:`~tabletopic.broker.record_validation.RecordValidator`
port implemented against the schema registry (Confluent Server's ``confluent.*.schema.validation``).

It sits beside ``table/`` rather than inside it: the broker asks it about records on the Produce
path whether or not a topic is a table topic. It reuses the table pipeline's Avro decoder for the
per-record fallback, so it is layered above ``table/`` and below the node assembly.
"""
