"""Schemas more than one registry test uses: an Avro record referring to another by name."""

from tests.support.schemas import avro_record

ADDRESS = avro_record("Address", {"city": "string"}, namespace="acme")
ORDER = avro_record("Order", {"id": "long", "ship_to": "acme.Address"}, namespace="acme")
