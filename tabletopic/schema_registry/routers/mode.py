"""``/mode``: READWRITE, READONLY(_OVERRIDE) and IMPORT (registering with given ids and versions,
for migrations from another registry)."""

from __future__ import annotations

from tabletopic.schema_registry.routers.deps import Registry, RegistryRouter, Subject
from tabletopic.schema_registry.routers.models import ModeBody

router = RegistryRouter(prefix="/mode", tags=["mode"])


@router.get("")
def get_global(registry: Registry) -> dict[str, str]:
    return {"mode": registry.get_mode(None).value}


@router.put("")
def put_global(registry: Registry, body: ModeBody, force: bool = False) -> dict[str, str]:
    return {"mode": registry.set_mode(None, body.mode, force).value}


@router.get("/{subject}")
def get_subject(registry: Registry, subject: Subject, defaultToGlobal: bool = False) -> dict[str, str]:
    return {"mode": registry.get_mode(subject, defaultToGlobal).value}


@router.put("/{subject}")
def put_subject(registry: Registry, subject: Subject, body: ModeBody, force: bool = False) -> dict[str, str]:
    return {"mode": registry.set_mode(subject, body.mode, force).value}


@router.delete("/{subject}")
def delete_subject(registry: Registry, subject: Subject) -> dict[str, str]:
    return {"mode": registry.delete_mode(subject).value}
