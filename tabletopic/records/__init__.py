"""Kafka's record batch format (magic v2, ``DefaultRecordBatch``): the one place that knows its bytes.

The broker stores every batch exactly as the producer sent it, so the same bytes are validated by
the broker (headers only: splitting a Produce payload, checking lengths and the CRC, stamping
LogAppendTime) and decoded record by record by the table pipeline (into columns, in Spark tasks).
Both use this package, and so do the tests and benchmarks that build batches.

Modules:

- :mod:`~tabletopic.records.header` -- the 61-byte header layout, :class:`BatchHeader`, header
  validation and rewrites;
- :mod:`~tabletopic.records.errors` -- :class:`RecordBatchError` and its :class:`BatchFault` kind;
- :mod:`~tabletopic.records.crc` -- the CRC32C over ``attributes`` .. end of batch;
- :mod:`~tabletopic.records.compression` -- the record block codecs (gzip, snappy incl. xerial
  framing, lz4, zstd);
- :mod:`~tabletopic.records.columns` -- the per-record decoding loop into parallel columns;
- :mod:`~tabletopic.records.native` -- the same loop in C (aiokafka's compiled reader), with the
  Python loop as fallback;
- :mod:`~tabletopic.records.transactions` -- control batches and read-committed filtering;
- :mod:`~tabletopic.records.decoder` -- stored batches -> columns for an offset range;
- :mod:`~tabletopic.records.encoder` -- building batches (producers in tests and benchmarks).

It sits at the bottom of the layering: it imports only the standard library, ``crc32c``,
:mod:`tabletopic.checksum`, ``cramjam`` and (lazily, optionally) aiokafka's C record reader, so
storage, broker and table code can all depend on it.
"""
