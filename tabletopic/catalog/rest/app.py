"""The Iceberg REST catalog HTTP API (config, namespace and table endpoints of the spec).

One router per resource, mounted by :func:`create_app`. Bodies are parsed by hand from the raw bytes
with the lenient models in :mod:`.models` so that garbage JSON and schema violations both become the
spec's 400 ``BadRequestException`` rather than FastAPI's 422. Catalog work is blocking (database,
file IO, Glue/Hive clients), so it runs in the thread pool and never stalls the node's event loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from tabletopic.catalog.rest.errors import BadRequest, install_error_handlers
from tabletopic.catalog.rest.models import (
    CommitTableBody,
    CreateNamespaceBody,
    CreateTableBody,
    RegisterTableBody,
    RenameTableBody,
    UpdateNamespacePropertiesBody,
)
from tabletopic.catalog.rest.service import (
    CatalogService,
    LoadedTable,
    Page,
    parse_namespace,
    validate_table_name,
)

log = logging.getLogger(__name__)

ModelT = TypeVar("ModelT", bound=BaseModel)
T = TypeVar("T")

MAX_BODY_BYTES = 64 << 20  # metadata updates can be large (many snapshots), but not unbounded

# What the config endpoint advertises. Clients (Iceberg Java >= 1.7, pyiceberg) call only these, so
# views and multi-table transactions, which this server does not implement, are never attempted.
ENDPOINTS = (
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "POST /v1/{prefix}/tables/rename",
)

PageToken = Annotated[str | None, Query(alias="pageToken")]
PageSize = Annotated[int | None, Query(alias="pageSize")]


async def read_body(request: Request, model: type[ModelT]) -> ModelT:
    """Parse a JSON body into ``model``; anything malformed is a 400 BadRequestException."""
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise BadRequest(f"request body larger than {MAX_BODY_BYTES} bytes")
    if not raw.strip():
        raise BadRequest("request body is empty")
    try:
        json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"request body is not JSON: {exc}") from exc
    except RecursionError as exc:
        raise BadRequest("request body nests too deeply") from exc
    try:
        return model.model_validate_json(raw)
    except RecursionError as exc:
        raise BadRequest("request body nests too deeply") from exc


def json_response(payload: Any, status: int = 200) -> Response:
    return JSONResponse(payload, status_code=status)


def model_response(model: BaseModel) -> Response:
    """Serialise pyiceberg models with their spec aliases, exactly as pyiceberg writes metadata files."""
    text = model.model_dump_json(by_alias=True, exclude_none=True)
    return Response(text, media_type="application/json")


def table_response(loaded: LoadedTable) -> Response:
    metadata = loaded.metadata.model_dump_json(by_alias=True, exclude_none=True)
    head: dict[str, Any] = {"config": loaded.config}
    if loaded.metadata_location is not None:
        head["metadata-location"] = loaded.metadata_location
    # Splice the metadata in as pre-rendered JSON rather than round-tripping it through dicts.
    text = json.dumps(head)[:-1] + ', "metadata": ' + metadata + "}"
    return Response(text, media_type="application/json")


def page_response(key: str, page: Page, render: Callable[[tuple[str, ...]], Any]) -> Response:
    payload: dict[str, Any] = {key: [render(item) for item in page.items]}
    if page.next_page_token is not None:
        payload["next-page-token"] = page.next_page_token
    return json_response(payload)


def table_identifier(namespace: str, table: str) -> tuple[str, ...]:
    validate_table_name(table)
    return (*parse_namespace(namespace), table)


def config_router(service: CatalogService, defaults: dict[str, str]) -> APIRouter:
    router = APIRouter()

    @router.get("/v1/config")
    async def get_config(warehouse: str | None = None) -> Response:
        return json_response({"defaults": defaults, "overrides": {}, "endpoints": list(ENDPOINTS)})

    return router


def namespaces_router(service: CatalogService) -> APIRouter:
    router = APIRouter(prefix="/v1/namespaces")

    @router.get("")
    async def list_namespaces(
        parent: str | None = None, page_token: PageToken = None, page_size: PageSize = None
    ) -> Response:
        parent_ns = parse_namespace(parent) if parent else ()
        page = await run_in_threadpool(service.list_namespaces, parent_ns, page_token, page_size)
        return page_response("namespaces", page, list)

    @router.post("")
    async def create_namespace(request: Request) -> Response:
        body = await read_body(request, CreateNamespaceBody)
        namespace, properties = await run_in_threadpool(service.create_namespace, body)
        return json_response({"namespace": list(namespace), "properties": properties})

    @router.get("/{namespace}")
    async def load_namespace(namespace: str) -> Response:
        ns = parse_namespace(namespace)
        properties = await run_in_threadpool(service.load_namespace, ns)
        return json_response({"namespace": list(ns), "properties": properties})

    @router.head("/{namespace}")
    async def namespace_exists(namespace: str) -> Response:
        exists = await run_in_threadpool(service.namespace_exists, parse_namespace(namespace))
        return Response(status_code=204 if exists else 404)

    @router.delete("/{namespace}")
    async def drop_namespace(namespace: str) -> Response:
        await run_in_threadpool(service.drop_namespace, parse_namespace(namespace))
        return Response(status_code=204)

    @router.post("/{namespace}/properties")
    async def update_properties(namespace: str, request: Request) -> Response:
        body = await read_body(request, UpdateNamespacePropertiesBody)
        summary = await run_in_threadpool(
            service.update_namespace_properties, parse_namespace(namespace), body
        )
        return json_response(summary)

    return router


def tables_router(service: CatalogService) -> APIRouter:
    router = APIRouter(prefix="/v1")

    @router.get("/namespaces/{namespace}/tables")
    async def list_tables(
        namespace: str, page_token: PageToken = None, page_size: PageSize = None
    ) -> Response:
        page = await run_in_threadpool(service.list_tables, parse_namespace(namespace), page_token, page_size)
        return page_response(
            "identifiers", page, lambda ident: {"namespace": list(ident[:-1]), "name": ident[-1]}
        )

    @router.post("/namespaces/{namespace}/tables")
    async def create_table(namespace: str, request: Request) -> Response:
        body = await read_body(request, CreateTableBody)
        loaded = await run_in_threadpool(service.create_table, parse_namespace(namespace), body)
        return table_response(loaded)

    @router.post("/namespaces/{namespace}/register")
    async def register_table(namespace: str, request: Request) -> Response:
        body = await read_body(request, RegisterTableBody)
        loaded = await run_in_threadpool(service.register_table, parse_namespace(namespace), body)
        return table_response(loaded)

    @router.get("/namespaces/{namespace}/tables/{table}")
    async def load_table(namespace: str, table: str, snapshots: str | None = None) -> Response:
        loaded = await run_in_threadpool(service.load_table, table_identifier(namespace, table))
        return table_response(loaded)

    @router.head("/namespaces/{namespace}/tables/{table}")
    async def table_exists(namespace: str, table: str) -> Response:
        exists = await run_in_threadpool(service.table_exists, table_identifier(namespace, table))
        return Response(status_code=204 if exists else 404)

    @router.post("/namespaces/{namespace}/tables/{table}")
    async def commit_table(namespace: str, table: str, request: Request) -> Response:
        body = await read_body(request, CommitTableBody)
        result = await run_in_threadpool(service.commit_table, table_identifier(namespace, table), body)
        return model_response(result)

    @router.delete("/namespaces/{namespace}/tables/{table}")
    async def drop_table(
        namespace: str, table: str, purge: Annotated[bool, Query(alias="purgeRequested")] = False
    ) -> Response:
        await run_in_threadpool(service.drop_table, table_identifier(namespace, table), purge)
        return Response(status_code=204)

    @router.post("/namespaces/{namespace}/tables/{table}/metrics")
    async def report_metrics(namespace: str, table: str, request: Request) -> Response:
        # Scan and commit reports are accepted and dropped: engines send them after every query.
        await request.body()
        return Response(status_code=204)

    @router.post("/tables/rename")
    async def rename_table(request: Request) -> Response:
        body = await read_body(request, RenameTableBody)
        source = (*body.source.namespace, body.source.name)
        destination = (*body.destination.namespace, body.destination.name)
        await run_in_threadpool(service.rename_table, source, destination)
        return Response(status_code=204)

    return router


def create_app(service: CatalogService, defaults: dict[str, str] | None = None) -> FastAPI:
    """The REST catalog app serving ``service``.

    Args:
        service: the catalog semantics (backing pyiceberg catalog).
        defaults: client defaults returned by ``GET /v1/config``.
    """
    app = FastAPI(
        title="tabletopic Iceberg REST catalog",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    install_error_handlers(app)
    app.include_router(config_router(service, dict(defaults or {})))
    app.include_router(namespaces_router(service))
    app.include_router(tables_router(service))
    app.state.catalog_service = service
    return app
