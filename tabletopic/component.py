"""The shape of every part of a node, and the one check each part makes of the parts it was given.

A part is built with the parts it depends on (constructor injection, wired by
:mod:`tabletopic.platform`) and reads what they offer only once it starts, because what they offer
(a started store, a bound listener) exists only after they have started. Start order guarantees it;
:func:`started` turns a violation of that order into an error that says which part was missing.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

T = TypeVar("T")


class Component(Protocol):
    """One part of a node: started in order on the node's event loop, stopped in reverse order."""

    name: str

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class NotStarted(RuntimeError):
    """A part was asked for something it only has once started (a wiring or start-order bug)."""


def started(value: T | None, part: str, what: str) -> T:
    """``value`` if the part has started, else :class:`NotStarted` naming the part and the thing.

    Raises:
        NotStarted: ``value`` is None.
    """
    if value is None:
        raise NotStarted(f"the {part} component has not started, so it has no {what} yet")
    return value
