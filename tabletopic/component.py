"""The shape of every part of a node, and the one check each part makes of the parts it was given.

A part is built with the parts it depends on (constructor injection, wired by
:mod:`tabletopic.platform`) and reads what they offer only once it starts, because what they offer
(a started store, a bound listener) exists only after they have started. Start order guarantees it;
:func:`started` (and the :class:`Started` attributes that read through it) turns a violation of that
order into an error that says which part was missing.
"""

from __future__ import annotations

from typing import Generic, Protocol, Self, TypeVar, overload

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


class Started(Generic[T]):
    """A part a component opens in ``start()``, read as an attribute of the component.

    ``part = Started[T]("what")`` in the class body reads the component's ``_part`` (None until
    ``start()`` sets it) through :func:`started`: the part, or :class:`NotStarted` naming the
    component and ``what``. One line a part, where a property a part said the same thing each time.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self.__doc__ = f"The started {what}."

    def __set_name__(self, owner: type, name: str) -> None:
        self.attribute = "_" + name

    @overload
    def __get__(self, component: None, owner: type) -> Self: ...

    @overload
    def __get__(self, component: Component, owner: type) -> T: ...

    def __get__(self, component: Component | None, owner: type) -> Self | T:
        if component is None:
            return self
        value: T | None = getattr(component, self.attribute)
        return started(value, component.name, self.what)
