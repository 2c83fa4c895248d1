"""What the REST catalog does, without HTTP: namespaces, tables and commits over any pyiceberg
catalog (the built-in SqlCatalog, or a Glue, Hive or SQL catalog it fronts).

Commits are applied by the backing catalog's own ``commit_table``: it re-reads the current metadata,
validates the requirements against it (a failed one is ``CommitFailedException``), applies the
updates with pyiceberg's metadata update functions, writes the new metadata file and swaps the
pointer with a compare-and-swap (SQL ``UPDATE ... WHERE metadata_location = old``, Glue ``VersionId``,
Hive lock). Two writers racing on one table therefore cannot both win, and the loser retries.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyiceberg.catalog import Catalog, MetastoreCatalog, delete_data_files, delete_files
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.io import load_file_io
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, StagedTable, Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    AssertCreate,
    SetLocationUpdate,
    SetPropertiesUpdate,
    TableUpdate,
)
from pyiceberg.typedef import Identifier, Properties

from tabletopic.catalog.adapters import normalize_location
from tabletopic.catalog.rest.confine import ConfinedFileIO, Warehouse, validate_name
from tabletopic.catalog.rest.errors import BadRequest
from tabletopic.catalog.rest.models import (
    CommitTableBody,
    CreateNamespaceBody,
    CreateTableBody,
    RegisterTableBody,
    UpdateNamespacePropertiesBody,
)

log = logging.getLogger(__name__)

NAMESPACE_SEPARATOR = "\x1f"  # the spec's unit separator, %1F in URLs


@dataclass(frozen=True, slots=True)
class LoadedTable:
    """A table as the REST API returns it."""

    metadata: TableMetadata
    metadata_location: str | None
    config: dict[str, str]


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Identifier]
    next_page_token: str | None


def parse_namespace(raw: str) -> Identifier:
    """``a%1Fb`` (already URL-decoded to ``a\\x1fb``) -> ``("a", "b")``.

    Raises:
        BadRequest: an empty level, or a dot inside a level (the SQL and Hive backends use dots as the
            level separator, so ``a.b`` as one level would silently become two).
    """
    levels = tuple(raw.split(NAMESPACE_SEPARATOR))
    validate_namespace(levels)
    return levels


def validate_namespace(levels: tuple[str, ...] | list[str]) -> None:
    if not levels or any(not level for level in levels):
        raise BadRequest(f"invalid namespace {list(levels)!r}: empty level")
    for level in levels:
        # A level becomes the directory ``<level>.db`` under the warehouse.
        validate_name(level, "namespace level", max_bytes=252)
    if any("." in level for level in levels):
        raise BadRequest(f"invalid namespace {list(levels)!r}: '.' is not allowed in a level")


def validate_table_name(name: str) -> None:
    """Raises: BadRequest for a table name that is not one safe path component (it becomes the
    table's directory under its namespace's)."""
    validate_name(name, "table name")


def paginate(items: list[Identifier], page_token: str | None, page_size: int | None, limit: int) -> Page:
    """Stable pages over a sorted listing; the token is the offset of the next item.

    Raises:
        BadRequest: a token this server did not issue, or a page size below 1.
    """
    items = sorted(items)
    start = 0
    if page_token:
        try:
            start = int(page_token)
        except ValueError as exc:
            raise BadRequest(f"invalid pageToken {page_token!r}") from exc
        if start < 0:
            raise BadRequest(f"invalid pageToken {page_token!r}")
    if page_size is not None and page_size < 1:
        raise BadRequest("pageSize must be at least 1")
    size = min(page_size or limit, limit)
    end = start + size
    return Page(items[start:end], str(end) if end < len(items) else None)


class CatalogService:
    """REST semantics over one pyiceberg catalog.

    Args:
        catalog: the backing catalog; ``MetastoreCatalog`` subclasses get staged creates.
        table_config: properties returned with every loaded table (e.g. the ``s3.*`` FileIO settings
            so pyiceberg clients can read the data files without their own configuration).
        max_page_size: cap on listing pages.
        warehouse: the catalog's warehouse; every location a client names (a table's, its
            ``write.*.path`` properties, registered metadata, snapshot manifest lists) must lie
            under it, and a purge deletes nothing outside it.
    """

    def __init__(
        self,
        catalog: Catalog,
        table_config: Properties | None = None,
        max_page_size: int = 1000,
        warehouse: str | None = None,
    ):
        self.catalog = catalog
        self.table_config = dict(table_config or {})
        self.max_page_size = max_page_size
        self.warehouse = Warehouse(warehouse)

    # ---------------------------------------------------------------------------------- namespaces

    def list_namespaces(self, parent: Identifier, page_token: str | None, page_size: int | None) -> Page:
        if parent and not self.catalog.namespace_exists(parent):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(parent)}")
        return paginate(self.catalog.list_namespaces(parent), page_token, page_size, self.max_page_size)

    def create_namespace(self, body: CreateNamespaceBody) -> tuple[Identifier, Properties]:
        validate_namespace(body.namespace)
        # A namespace's location is where its tables go by default.
        if "location" in body.properties:
            self.warehouse.check(body.properties["location"], "location")
        namespace = tuple(body.namespace)
        self.catalog.create_namespace(namespace, body.properties)
        return namespace, self.catalog.load_namespace_properties(namespace)

    def load_namespace(self, namespace: Identifier) -> Properties:
        return self.catalog.load_namespace_properties(namespace)

    def namespace_exists(self, namespace: Identifier) -> bool:
        return self.catalog.namespace_exists(namespace)

    def drop_namespace(self, namespace: Identifier) -> None:
        self.catalog.drop_namespace(namespace)

    def update_namespace_properties(
        self, namespace: Identifier, body: UpdateNamespacePropertiesBody
    ) -> dict[str, list[str]]:
        if "location" in body.updates:
            self.warehouse.check(body.updates["location"], "location")
        summary = self.catalog.update_namespace_properties(namespace, set(body.removals), body.updates)
        return {"updated": summary.updated, "removed": summary.removed, "missing": summary.missing}

    # -------------------------------------------------------------------------------------- tables

    def list_tables(self, namespace: Identifier, page_token: str | None, page_size: int | None) -> Page:
        if not self.catalog.namespace_exists(namespace):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(namespace)}")
        return paginate(self.catalog.list_tables(namespace), page_token, page_size, self.max_page_size)

    def create_table(self, namespace: Identifier, body: CreateTableBody) -> LoadedTable:
        """Create a table, or with ``stage-create`` only build its first metadata.

        A staged create persists nothing: the client later commits with an ``assert-create``
        requirement and the full list of updates (that is how Spark runs CREATE TABLE AS SELECT).
        """
        if not self.catalog.namespace_exists(namespace):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(namespace)}")
        validate_table_name(body.name)
        identifier = (*namespace, body.name)
        location = normalize_location(body.location) if body.location else None
        allowed = self._allowed(identifier)
        if location is not None:
            allowed.check(location, "location")
        allowed.check_properties(body.properties)
        spec = body.partition_spec or UNPARTITIONED_PARTITION_SPEC
        order = body.write_order or UNSORTED_SORT_ORDER
        if body.stage_create:
            if not isinstance(self.catalog, MetastoreCatalog):
                raise NotImplementedError("staged create needs a metastore-backed catalog")
            if self.catalog.table_exists(identifier):
                raise TableAlreadyExistsError(f"Table already exists: {'.'.join(identifier)}")
            staged = self.catalog._create_staged_table(
                identifier, body.table_schema, location, spec, order, body.properties
            )
            return LoadedTable(staged.metadata, None, dict(self.table_config))
        table = self.catalog.create_table(
            identifier, body.table_schema, location, spec, order, body.properties
        )
        return self._loaded(table)

    def register_table(self, namespace: Identifier, body: RegisterTableBody) -> LoadedTable:
        if body.overwrite:
            raise NotImplementedError("register with overwrite is not supported")
        validate_table_name(body.name)
        self._allowed((*namespace, body.name)).check(body.metadata_location, "metadata-location")
        # Read the metadata first: some backends record the table before loading it and would keep a
        # row pointing at a file that does not exist.
        try:
            io = load_file_io(self.catalog.properties, body.metadata_location)
            FromInputFile.table_metadata(io.new_input(body.metadata_location))
        except (OSError, ValueError) as exc:
            raise BadRequest(f"cannot read table metadata at {body.metadata_location}: {exc}") from exc
        table = self.catalog.register_table((*namespace, body.name), body.metadata_location)
        return self._loaded(table)

    def load_table(self, identifier: Identifier) -> LoadedTable:
        return self._loaded(self.catalog.load_table(identifier))

    def table_exists(self, identifier: Identifier) -> bool:
        return self.catalog.table_exists(identifier)

    def drop_table(self, identifier: Identifier, purge: bool) -> None:
        if purge:
            self._purge(identifier)
        else:
            self.catalog.drop_table(identifier)

    def _purge(self, identifier: Identifier) -> None:
        """pyiceberg's ``purge_table``, with deletes confined to the warehouse: the paths come from
        metadata and manifests a client wrote."""
        table = self.catalog.load_table(identifier)
        self.catalog.drop_table(identifier)
        allowed = self.warehouse.with_roots(table.metadata.location)
        io = ConfinedFileIO(load_file_io(self.catalog.properties, table.metadata_location), allowed)
        metadata = table.metadata
        manifests = [manifest for snapshot in metadata.snapshots for manifest in snapshot.manifests(io)]
        delete_data_files(io, manifests)
        delete_files(io, {manifest.manifest_path for manifest in manifests}, "manifest")
        delete_files(io, {snapshot.manifest_list for snapshot in metadata.snapshots}, "manifest list")
        delete_files(io, {entry.metadata_file for entry in metadata.metadata_log}, "previous metadata")
        if table.metadata_location:
            delete_files(io, {table.metadata_location}, "metadata")

    def rename_table(self, source: Identifier, destination: Identifier) -> None:
        validate_namespace(source[:-1])
        validate_namespace(destination[:-1])
        validate_table_name(destination[-1])
        self.catalog.rename_table(source, destination)

    def commit_table(self, identifier: Identifier, body: CommitTableBody) -> CommitTableResponse:
        """Apply one commit: requirements validated and updates applied by the backing catalog.

        Raises:
            NoSuchTableError: the table does not exist and this is not a create transaction.
            CommitFailedException: a requirement does not hold (another writer got there first).
        """
        if body.identifier is not None:
            named = (*body.identifier.namespace, body.identifier.name)
            if named != identifier:
                raise BadRequest(
                    f"identifier {'.'.join(named)} does not match the URL {'.'.join(identifier)}"
                )
        requirements = tuple(body.requirements)
        updates = tuple(body.updates)
        try:
            current: Table = self.catalog.load_table(identifier)
        except NoSuchTableError:
            if not any(isinstance(r, AssertCreate) for r in requirements):
                raise
            validate_table_name(identifier[-1])
            self._check_locations(self._allowed(identifier), updates)
            if not self.catalog.namespace_exists(identifier[:-1]):
                raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(identifier[:-1])}") from None
            # A create transaction: the backing catalog builds the metadata from nothing.
            current = StagedTable(
                identifier=identifier,
                metadata=MetastoreCatalog._empty_table_metadata(),
                metadata_location="",
                io=self.catalog._load_file_io(),
                catalog=self.catalog,
            )
        else:
            self._check_locations(self._allowed(identifier, current.metadata.location), updates)
        return self.catalog.commit_table(current, requirements, updates)

    def _allowed(self, identifier: Identifier, current_location: str | None = None) -> Warehouse:
        """Where files of ``identifier`` may go: the warehouse, where the backing catalog puts the
        table by default (a Hive or Glue database may have a location of its own), and the table's
        current location."""
        default = None
        if isinstance(self.catalog, MetastoreCatalog):
            try:
                default = self.catalog._resolve_table_location(
                    None, ".".join(identifier[:-1]), identifier[-1]
                )
            except (ValueError, NoSuchNamespaceError):
                default = None
        return self.warehouse.with_roots(default, current_location)

    @staticmethod
    def _check_locations(allowed: Warehouse, updates: tuple[TableUpdate, ...]) -> None:
        """Raises: BadRequest when an update would place or list files outside ``allowed``."""
        for update in updates:
            if isinstance(update, SetLocationUpdate):
                allowed.check(update.location, "location")
            elif isinstance(update, SetPropertiesUpdate):
                allowed.check_properties(update.updates)
            elif isinstance(update, AddSnapshotUpdate):
                allowed.check(update.snapshot.manifest_list, "manifest-list")

    def _loaded(self, table: Table) -> LoadedTable:
        return LoadedTable(table.metadata, table.metadata_location, dict(self.table_config))
