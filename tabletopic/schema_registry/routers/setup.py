"""Every resource's router, mounted on the app in one place."""

from __future__ import annotations

from fastapi import FastAPI

from tabletopic.schema_registry.routers import (
    associations,
    compatibility,
    config,
    contexts,
    metadata,
    mode,
    root,
    schemas,
    subjects,
)


def setup_routers(app: FastAPI) -> None:
    for module in (schemas, subjects, compatibility, config, mode, root, contexts, metadata, associations):
        app.include_router(module.router)
