"""S3Stream-style storage on object storage: WAL, log cache, block cache, stream-set and stream
objects, compaction. Knows nothing of Kafka; see :mod:`tabletopic.s3stream.api` for the contract."""
