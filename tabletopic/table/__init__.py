"""Table topics: Kafka topics continuously materialised into Iceberg tables, exactly once."""
