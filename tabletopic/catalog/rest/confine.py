"""What a REST client may name: table and namespace names that are safe as path components, and
locations inside the catalog's warehouse.

The catalog writes metadata files where a table's location (or its ``write.metadata.path``) says,
and a purge deletes every file the metadata lists. Both run with the node's own file permissions,
so a name like ``../../x`` or a location like ``file:///var/lib/node/metadata.db`` would let any
read-write client write or delete files outside the warehouse. Everything here is pure; the
service calls it before anything touches storage.
"""

from __future__ import annotations

import logging
from urllib.parse import unquote, urlsplit

from pyiceberg.io import FileIO, InputFile, OutputFile

from tabletopic.catalog.adapters import normalize_location
from tabletopic.catalog.rest.errors import BadRequest

log = logging.getLogger(__name__)

# A file name component may not be longer on common file systems; a namespace level gets ``.db``.
MAX_NAME_BYTES = 255
# Table properties that move where files of the table are written.
LOCATION_PROPERTIES = (
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)
_S3_SCHEMES = {"s3a": "s3", "s3n": "s3"}


def validate_name(name: str, what: str, max_bytes: int = MAX_NAME_BYTES) -> None:
    """Refuse a table name or namespace level that is not one safe path component.

    Raises:
        BadRequest: empty, ``.`` or ``..``, containing ``/``, ``\\`` or a control character, or
            longer than ``max_bytes`` in UTF-8.
    """
    if not name:
        raise BadRequest(f"invalid {what}: empty")
    if len(name.encode("utf-8", "surrogatepass")) > max_bytes:
        raise BadRequest(f"invalid {what}: longer than {max_bytes} bytes")
    if name in (".", ".."):
        raise BadRequest(f"invalid {what} {name!r}")
    if any(c in "/\\" or ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise BadRequest(f"invalid {what} {name[:80]!r}: '/', '\\' and control characters are not allowed")


def _parts(location: str) -> tuple[str, str, list[str]]:
    """(scheme, authority, path segments) of a normalised location."""
    parsed = urlsplit(normalize_location(location))
    scheme = _S3_SCHEMES.get(parsed.scheme.lower(), parsed.scheme.lower())
    segments = [s for s in parsed.path.split("/") if s]
    return scheme, parsed.netloc, segments


class Warehouse:
    """The roots every location a client names must lie under.

    Args:
        root: the catalog's warehouse (``file:///...``, ``s3://bucket/prefix``), or None when the
            catalog has none.
        extra: further roots that the catalog itself chose, not the client: where a metastore puts
            a table by default, a table's current location.

    With no root at all, any location on the node's own file system is refused and other schemes are
    left to the backing catalog.
    """

    def __init__(self, root: str | None, extra: tuple[str, ...] = ()) -> None:
        self.root = root
        self._extra = extra
        self._roots = [_parts(r) for r in (root, *extra) if r]

    def with_roots(self, *roots: str | None) -> Warehouse:
        """This warehouse, also allowing locations under ``roots`` (None entries are skipped)."""
        extra = tuple(r for r in roots if r)
        return Warehouse(self.root, (*self._extra, *extra))

    def contains(self, location: str) -> bool:
        try:
            scheme, authority, segments = _parts(location)
        except ValueError:
            return False
        if any(unquote(s) in (".", "..") for s in segments):
            return False
        if not self._roots:
            return scheme not in ("", "file")
        return any(
            scheme == root_scheme and authority == root_authority and segments[: len(root)] == root
            for root_scheme, root_authority, root in self._roots
        )

    def check(self, location: str, what: str) -> None:
        """Raises: BadRequest naming ``what`` when ``location`` is outside the warehouse."""
        if not self.contains(location):
            where = f"the warehouse {self.root}" if self.root else "a remote warehouse"
            raise BadRequest(f"{what} {location[:200]!r} is not inside {where}")

    def check_properties(self, properties: dict[str, str]) -> None:
        """Raises: BadRequest when a property that places files points outside the warehouse."""
        for key in LOCATION_PROPERTIES:
            if key in properties:
                self.check(properties[key], key)


class ConfinedFileIO(FileIO):
    """A FileIO that deletes only inside the warehouse (a purge follows paths from metadata a client
    wrote); anything else is skipped with a warning."""

    def __init__(self, io: FileIO, warehouse: Warehouse) -> None:
        super().__init__(io.properties)
        self._io = io
        self._warehouse = warehouse

    def new_input(self, location: str) -> InputFile:
        return self._io.new_input(location)

    def new_output(self, location: str) -> OutputFile:
        if not self._warehouse.contains(location):
            raise PermissionError(f"{location} is outside the warehouse")
        return self._io.new_output(location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        path = location if isinstance(location, str) else location.location
        if not self._warehouse.contains(path):
            log.warning("purge: not deleting %s, which is outside the warehouse", path)
            return
        self._io.delete(location)
