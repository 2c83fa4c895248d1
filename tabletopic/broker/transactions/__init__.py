"""Kafka transactions: the coordinator's sans-IO state machine (``machine``, its transition table in
``transitions``) and the asyncio driver around it (``coordinator``), durable per transactional id
state (``store``), markers through the partitions' leaders (``markers``), and the partition side
(last stable offset, aborted transactions) Fetch reads (``participants``, ``partitions``).

The package re-exports nothing: a name is imported from the module that defines it, so importing
the package's settings module does not pull in the coordinator and its store."""
