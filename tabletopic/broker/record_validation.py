"""The broker's port for validating record contents on Produce (schema validation, issue 14).

The broker never decodes records on its own: it stores batches as they came. A topic may ask for
more (Confluent Server's ``confluent.value.schema.validation`` / ``confluent.key.schema.validation``);
then the node's assembly hands the broker a :class:`RecordValidator` that decodes the batches and
says which records it refuses. The broker knows only this port: the validator lives above it (it
needs the schema registry and the table pipeline's column decoders), as topic-config extensions do.

Produce answers a refusal as Kafka's ProduceResponse v8+ does: INVALID_RECORD for the partition,
``record_errors`` (batch index + message per refused record) and an ``error_message``; nothing of
the partition's batches is appended.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from tabletopic.records.header import BatchHeader


@dataclass(frozen=True, slots=True)
class RecordError:
    """One refused record: its index inside its batch (Kafka's ``batch_index``) and why."""

    batch_index: int
    message: str


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a partition's batches were refused; ``retriable`` when the validator could not decide
    (the schema registry unreachable), so the client should retry rather than drop the records."""

    message: str
    record_errors: tuple[RecordError, ...] = ()
    retriable: bool = False


class RecordValidator(Protocol):
    """Checks record contents of a Produce before anything is appended."""

    def enabled(self, configs: Mapping[str, str]) -> bool:
        """Whether a topic with these explicit configs wants its records validated (cheap: it is
        asked for every produced partition)."""

    async def check(
        self,
        topic: str,
        configs: Mapping[str, str],
        records: bytes | memoryview,
        headers: Sequence[BatchHeader],
    ) -> Rejection | None:
        """Validate the partition's batches (already checked by ``records.validate_batches``);
        None accepts them all."""
