"""Every resource's router, mounted on the app in one place."""

from __future__ import annotations

from fastapi import FastAPI

from tabletopic.schema_registry.routers import (
    associations,
    compatibility,
    config,
    contexts,
    exporters,
    metadata,
    mode,
    root,
    schemas,
    subjects,
)

# Every resource's router, in mounting order (tests walk it to reach every route).
ROUTERS = tuple(
    module.router
    for module in (
        schemas,
        subjects,
        compatibility,
        config,
        mode,
        root,
        contexts,
        metadata,
        associations,
        exporters,
    )
)


def setup_routers(app: FastAPI) -> None:
    for router in ROUTERS:
        app.include_router(router)
