"""Compatibility levels composed from one pairwise question, ``reader_can_read`` (pure, no HTTP).

BACKWARD: the new schema reads data written with the previous one. FORWARD: the previous schema
reads data written with the new one. FULL: both. The ``_TRANSITIVE`` variants ask the same of every
earlier live version instead of the latest only. NONE asks nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from tabletopic.schema_registry.formats.base import Incompatibility, ParsedSchema, SchemaFormat


class CompatibilityLevel(StrEnum):
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.value.startswith(("FORWARD", "FULL"))

    @classmethod
    def parse(cls, raw: object) -> CompatibilityLevel | None:
        """The level named by ``raw`` (any case), or ``None`` when it names none."""
        if not isinstance(raw, str):
            return None
        try:
            return cls(raw.strip().upper())
        except ValueError:
            return None


class Direction(StrEnum):
    """Which way a check failed (spelt as in ``verbose=true`` messages)."""

    BACKWARD = "BACKWARD"  # the new schema cannot read data written with the old one
    FORWARD = "FORWARD"  # the old schema cannot read data written with the new one
    TYPE = "TYPE"  # the schema type changed, so neither reads the other


@dataclass(frozen=True, slots=True)
class PreviousSchema:
    """One earlier live version a candidate is checked against."""

    version: int
    schema: ParsedSchema


@dataclass(frozen=True, slots=True)
class CompatibilityFailure:
    """Why the candidate is incompatible with one earlier ``version``, and in which direction."""

    version: int
    direction: Direction
    incompatibility: Incompatibility

    def describe(self) -> str:
        """One ``verbose=true`` message in Confluent's style, with reader/writer spelt as the new or
        old schema depending on the direction that failed."""
        inc = self.incompatibility
        reader, writer = ("new", "old") if self.direction is Direction.BACKWARD else ("old", "new")
        text = inc.message
        if self.direction is not Direction.TYPE:
            for role, age in (("reader", reader), ("writer", writer)):
                text = text.replace(f"{role} schema", f"{age} schema").replace(f"{role} type", f"{age} type")
        return (
            f"{{errorType:'{inc.kind}', location:'{inc.location}', description:'{text}', "
            f"oldSchemaVersion:{self.version}, direction:'{self.direction}'}}"
        )


def check(
    level: CompatibilityLevel,
    fmt: SchemaFormat,
    candidate: ParsedSchema,
    previous: Sequence[PreviousSchema],
) -> list[CompatibilityFailure]:
    """Every failure of ``candidate`` against ``previous`` (oldest first) under ``level``.

    Returns:
        An empty list when the candidate may be registered.
    """
    if level is CompatibilityLevel.NONE or not previous:
        return []
    targets = previous if level.transitive else previous[-1:]
    failures: list[CompatibilityFailure] = []
    for old in reversed(targets):
        if old.schema.schema_type != candidate.schema_type:
            failures.append(
                CompatibilityFailure(
                    old.version,
                    Direction.TYPE,
                    Incompatibility(
                        "SCHEMA_TYPE_CHANGED",
                        "/",
                        f"schema type {candidate.schema_type} differs from {old.schema.schema_type}",
                    ),
                )
            )
            continue
        if level.backward:
            failures += [
                CompatibilityFailure(old.version, Direction.BACKWARD, inc)
                for inc in fmt.reader_can_read(candidate, old.schema)
            ]
        if level.forward:
            failures += [
                CompatibilityFailure(old.version, Direction.FORWARD, inc)
                for inc in fmt.reader_can_read(old.schema, candidate)
            ]
    return failures
