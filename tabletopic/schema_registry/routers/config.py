"""``/config``: compatibility levels, global and per subject. ``GET`` answers ``compatibilityLevel``,
``PUT`` takes and answers ``compatibility`` (Confluent's asymmetry, which clients depend on)."""

from __future__ import annotations

from tabletopic.schema_registry.routers.deps import Registry, RegistryRouter, Subject
from tabletopic.schema_registry.routers.models import ConfigBody

router = RegistryRouter(prefix="/config", tags=["config"])


@router.get("")
def get_global(registry: Registry) -> dict[str, str]:
    return {"compatibilityLevel": registry.get_level(None).value}


@router.put("")
def put_global(registry: Registry, body: ConfigBody) -> dict[str, str]:
    return {"compatibility": registry.set_level(None, body.compatibility or body.compatibility_level).value}


@router.delete("")
def delete_global(registry: Registry) -> dict[str, str]:
    return {"compatibilityLevel": registry.delete_level(None).value}


@router.get("/{subject}")
def get_subject(registry: Registry, subject: Subject, defaultToGlobal: bool = False) -> dict[str, str]:
    return {"compatibilityLevel": registry.get_level(subject, defaultToGlobal).value}


@router.put("/{subject}")
def put_subject(registry: Registry, subject: Subject, body: ConfigBody) -> dict[str, str]:
    return {
        "compatibility": registry.set_level(subject, body.compatibility or body.compatibility_level).value
    }


@router.delete("/{subject}")
def delete_subject(registry: Registry, subject: Subject) -> dict[str, str]:
    return {"compatibilityLevel": registry.delete_level(subject).value}
