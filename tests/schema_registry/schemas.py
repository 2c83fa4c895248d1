"""Schemas more than one registry test uses: an Avro record referring to another by name."""

ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "acme",
    "fields": [{"name": "city", "type": "string"}],
}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "acme",
    "fields": [{"name": "id", "type": "long"}, {"name": "ship_to", "type": "acme.Address"}],
}
