"""``/contexts``: schema contexts as Confluent names them in subjects (``:.ctx:subject``).

A subject qualified with a context is stored under that qualified name, so ``GET /contexts`` lists
the default context ``.`` and every context some subject names. Each context counts its own ids
(see :mod:`tabletopic.schema_registry.contexts`); ``/contexts/{ctx}/...`` paths are rewritten to
qualified subjects before routing (:class:`.contextpaths.ContextPaths`).
"""

from __future__ import annotations

from fastapi import Response

from tabletopic.schema_registry.contexts import DEFAULT_CONTEXT, context_of
from tabletopic.schema_registry.errors import ErrorCode, RegistryError
from tabletopic.schema_registry.routers.deps import Registry, RegistryRouter, escape_segment

router = RegistryRouter(prefix="/contexts", tags=["contexts"])


@router.get("")
def contexts(registry: Registry) -> list[str]:
    named = {context_of(s) for s in registry.subjects("", deleted=True)}
    return sorted(named | {DEFAULT_CONTEXT})


@router.delete("/{context}", status_code=204)
def delete_context(registry: Registry, context: str) -> Response:
    """Confluent deletes only an empty context (42211 otherwise); contexts hold no state of their
    own here, so deleting an empty one is a no-op."""
    if context != DEFAULT_CONTEXT and any(
        context_of(s) == context for s in registry.subjects("", deleted=True)
    ):
        raise RegistryError(
            ErrorCode.CONTEXT_NOT_EMPTY, f"Context {escape_segment(context)[:200]} is not empty"
        )
    return Response(status_code=204)
