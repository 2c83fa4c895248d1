"""Request bodies of the REST catalog, as lenient as real clients need.

The table updates and requirements are pyiceberg's own discriminated unions, so a commit is applied
with exactly the code pyiceberg uses. The envelopes are ours because pyiceberg's client-side models
are stricter than what Iceberg Java sends: Spark's ``CreateTableRequest`` may omit ``write-order``
and ``partition-spec``, and its ``CommitTableRequest`` may omit ``identifier`` (it is in the URL).
"""

from __future__ import annotations

from pydantic import ConfigDict, Field
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import SortOrder
from pyiceberg.table.update import TableRequirement, TableUpdate
from pyiceberg.typedef import IcebergBaseModel


class _Body(IcebergBaseModel):
    # Unknown fields are ignored: newer clients may send fields this server does not use yet.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class TableIdentifierBody(_Body):
    namespace: list[str]
    name: str = Field(min_length=1)


class CreateNamespaceBody(_Body):
    namespace: list[str] = Field(min_length=1)
    properties: dict[str, str] = Field(default_factory=dict)


class UpdateNamespacePropertiesBody(_Body):
    removals: list[str] = Field(default_factory=list)
    updates: dict[str, str] = Field(default_factory=dict)


class CreateTableBody(_Body):
    name: str = Field(min_length=1)
    location: str | None = None
    table_schema: Schema = Field(alias="schema")
    partition_spec: PartitionSpec | None = Field(default=None, alias="partition-spec")
    write_order: SortOrder | None = Field(default=None, alias="write-order")
    stage_create: bool = Field(default=False, alias="stage-create")
    properties: dict[str, str] = Field(default_factory=dict)


class RegisterTableBody(_Body):
    name: str = Field(min_length=1)
    metadata_location: str = Field(alias="metadata-location")
    overwrite: bool = False


class CommitTableBody(_Body):
    identifier: TableIdentifierBody | None = None
    requirements: list[TableRequirement] = Field(default_factory=list)
    updates: list[TableUpdate] = Field(default_factory=list)


class RenameTableBody(_Body):
    source: TableIdentifierBody
    destination: TableIdentifierBody
