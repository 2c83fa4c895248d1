"""Schema contexts (Confluent's ``:.ctx:subject``): each context counts its own schema ids.

A context is named by the qualified subjects in it. Ids are stored as one 64-bit key: the context's
number in the high 32 bits (0 for the default context ``.``, so default-context ids are stored
as themselves) and the id clients see in the low 32 bits. Two contexts can therefore both hand out
id 1 for different schemas, as Confluent's do, while every row still has one key.
"""

from __future__ import annotations

DEFAULT_CONTEXT = "."
_SHIFT = 32
_MASK = (1 << _SHIFT) - 1


def context_of(subject: str) -> str:
    """``:.ctx:name`` -> ``.ctx``; any other subject is in the default context."""
    if subject.startswith(":.") and subject.count(":") >= 2:
        return subject[1 : subject.index(":", 1)]
    return DEFAULT_CONTEXT


def qualify(context: str, subject: str) -> str:
    """``subject`` in ``context`` (already qualified subjects and the default context unchanged)."""
    if context == DEFAULT_CONTEXT or subject.startswith(":."):
        return subject
    return f":{context}:{subject}"


def public_id(key: int) -> int:
    """The id clients see for a stored key."""
    return key & _MASK


def stored_key(context_number: int, schema_id: int) -> int:
    """The stored key of ``schema_id`` in the context numbered ``context_number``."""
    return (context_number << _SHIFT) | schema_id


def key_range(context_number: int) -> tuple[int, int]:
    """The lowest and highest stored key of a context."""
    low = context_number << _SHIFT
    return low, low | _MASK
