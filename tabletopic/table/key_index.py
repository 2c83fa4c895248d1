"""Where a batch's keys live in an upsert table: the live rows (data file, position) whose key is one
of the batch's keys.

Data and delete files are immutable, so what is learned from a file by its path stays true for good:
:class:`KeyCache` keeps each data file's key column (sorted, for numeric keys, so a batch is looked
up by binary search instead of a pass over every row) and each position-delete file's positions, in
a least-recently-used cache bounded in bytes (``table.upsert.key.cache.bytes``). A commit then reads
only the files it has not seen (its own previous commits' small files, a compaction's output), and
the table's other files cost a lookup. Files whose key bounds miss every batch key are not touched.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.conversions import from_bytes
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.table import Table
from pyiceberg.types import IntegerType, LongType, NestedField, StringType

# Key types whose manifest bounds can skip data files (strings' truncated bounds still enclose every
# value).
_PRUNABLE = (IntegerType, LongType, StringType)
THREADS = 4


def key_arrays(rows: pa.Table, id_columns: Sequence[str]) -> list[Any]:
    """The id columns as arrays; dotted paths reach into structs (a null struct gives a null key)."""
    keys = []
    for path in id_columns:
        head, *rest = path.split(".")
        column: Any = rows.column(head)
        for name in rest:
            column = pc.struct_field(column, name)
        keys.append(column)
    return keys


def composite(keys: Sequence[Any]) -> pa.Array:
    """One comparable value per row: the key itself, or for several columns an unambiguous binary
    encoding (length-prefixed parts, ``N`` for null) so rows match exactly when every column does
    (null matching null)."""
    if len(keys) == 1:
        key = keys[0]
        return key.combine_chunks() if isinstance(key, pa.ChunkedArray) else key
    sep, null = pa.scalar(b":", pa.large_binary()), pa.scalar(b"N", pa.large_binary())
    parts: list[Any] = []
    for key in keys:
        if not (pa.types.is_binary(key.type) or pa.types.is_large_binary(key.type)):
            key = pc.cast(key, pa.string())
        value = pc.cast(key, pa.large_binary())
        length = pc.cast(pc.cast(pc.binary_length(value), pa.string()), pa.large_binary())
        parts.append(pc.fill_null(pc.binary_join_element_wise(length, value, sep), null))
    joined = pc.binary_join_element_wise(*parts, pa.scalar(b"|", pa.large_binary()))
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


@dataclass(frozen=True)
class FileKeys:
    """One data file's keys. Numeric keys: ``sorted_keys`` with ``order`` (their positions) and the
    positions of null keys; other keys: the key array itself (matched by hash lookup)."""

    sorted_keys: np.ndarray | None
    order: np.ndarray | None
    null_positions: np.ndarray | None
    keys: pa.Array | None

    @staticmethod
    def of(keys: pa.Array) -> FileKeys:
        if pa.types.is_integer(keys.type):
            valid = pc.is_valid(keys).to_numpy(zero_copy_only=False)
            values = pc.cast(keys, pa.int64()) if not pa.types.is_int64(keys.type) else keys
            numbers = values.fill_null(0).to_numpy(zero_copy_only=False)
            positions = np.flatnonzero(valid).astype(np.int64)
            present = numbers[positions]
            # Files written in key order (the upsert commits' own) need no sort.
            if len(present) > 1 and not np.all(present[1:] >= present[:-1]):
                positions = positions[np.argsort(present, kind="stable")]
            order = positions
            return FileKeys(numbers[order], order, np.flatnonzero(~valid).astype(np.int64), None)
        return FileKeys(None, None, None, keys)

    @property
    def nbytes(self) -> int:
        if self.keys is not None:
            return int(self.keys.nbytes)
        assert self.sorted_keys is not None and self.order is not None and self.null_positions is not None
        return int(self.sorted_keys.nbytes + self.order.nbytes + self.null_positions.nbytes)

    def find(self, batch: BatchKeys) -> np.ndarray:
        """Positions (unsorted, possibly repeated) of rows whose key is one of ``batch``'s."""
        if self.keys is not None:
            if batch.values is None:
                return np.empty(0, np.int64)
            mask = pc.is_in(self.keys, value_set=batch.values, skip_nulls=False)
            return np.flatnonzero(mask.to_numpy(zero_copy_only=False))
        assert self.sorted_keys is not None and self.order is not None and self.null_positions is not None
        if batch.numbers is None:  # a batch key of another type cannot equal a numeric one
            return np.empty(0, np.int64)
        left = np.searchsorted(self.sorted_keys, batch.numbers, side="left")
        right = np.searchsorted(self.sorted_keys, batch.numbers, side="right")
        counts = right - left
        hit = counts > 0
        starts, counts = left[hit], counts[hit]
        total = int(counts.sum())
        index = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(total)
        found = self.order[index]
        if batch.has_null and len(self.null_positions):
            found = np.concatenate([found, self.null_positions])
        return found


@dataclass(frozen=True)
class BatchKeys:
    """A batch's distinct keys, in the shapes :meth:`FileKeys.find` looks them up in."""

    values: pa.Array | None
    numbers: np.ndarray | None
    has_null: bool

    @staticmethod
    def of(keys: pa.Array) -> BatchKeys:
        numbers = None
        if pa.types.is_integer(keys.type):
            values = pc.cast(keys, pa.int64()) if not pa.types.is_int64(keys.type) else keys
            # Sorted for the binary search; repeats would only repeat hits (found positions are
            # made unique), and the batch's keys are distinct already.
            numbers = np.sort(values.drop_null().to_numpy(zero_copy_only=False))
        return BatchKeys(keys, numbers, bool(keys.null_count))


class KeyCache:
    """Least-recently-used cache of data files' keys and delete files' positions, by file path,
    bounded by ``capacity`` bytes (0 caches nothing). Thread-safe; one per node, shared by its
    tables (paths are unique)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, path: str) -> Any:
        with self._lock:
            entry = self._entries.get(path)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(path)
            self.hits += 1
            return entry[0]

    def put(self, path: str, value: Any, nbytes: int) -> None:
        if nbytes > self.capacity:
            return
        with self._lock:
            old = self._entries.pop(path, None)
            if old is not None:
                self._size -= old[1]
            self._entries[path] = (value, nbytes)
            self._size += nbytes
            while self._size > self.capacity:
                _, (_, size) = self._entries.popitem(last=False)
                self._size -= size

    @property
    def size(self) -> int:
        return self._size


_NO_CACHE = KeyCache(0)


@dataclass(frozen=True)
class Match:
    data_file: DataFile
    positions: np.ndarray


class KeyLocator:
    """Finds the live rows of ``table`` (at its current snapshot) whose key is one of the batch's."""

    def __init__(
        self, table: Table, id_columns: Sequence[str], batch_keys: pa.Array, cache: KeyCache | None = None
    ) -> None:
        self._table = table
        self._io: FileIO = table.io
        self._id_columns = id_columns
        self._heads = sorted({path.split(".")[0] for path in id_columns})
        self._batch = BatchKeys.of(batch_keys)
        self._cache = cache or _NO_CACHE
        self._bounds = self._prunable_bounds(batch_keys)
        self.files_scanned = 0
        self.files_skipped = 0
        self.files_read = 0

    def _prunable_bounds(self, batch_keys: pa.Array) -> tuple[int, Any, np.ndarray] | None:
        """(field id, iceberg type, sorted batch keys) when files can be skipped by key bounds: one
        top-level key column of a simple type and no null key in the batch."""
        if len(self._id_columns) != 1 or "." in self._id_columns[0] or batch_keys.null_count:
            return None
        found: NestedField = self._table.schema().find_field(self._id_columns[0])
        if not isinstance(found.field_type, _PRUNABLE):
            return None
        values = np.sort(np.asarray(batch_keys.to_numpy(zero_copy_only=False)))
        return found.field_id, found.field_type, values

    def _may_hold(self, data_file: DataFile) -> bool:
        if self._bounds is None:
            return True
        field_id, kind, values = self._bounds
        lower = (data_file.lower_bounds or {}).get(field_id)
        upper = (data_file.upper_bounds or {}).get(field_id)
        if lower is None or upper is None:
            return True
        low, high = from_bytes(kind, lower), from_bytes(kind, upper)
        at = int(np.searchsorted(values, low, side="left"))
        return at < len(values) and values[at] <= high

    def _file_keys(self, data_file: DataFile) -> FileKeys:
        key = f"keys:{','.join(self._id_columns)}:{data_file.file_path}"
        cached = self._cache.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        with self._io.new_input(data_file.file_path).open() as stream:
            parquet = pq.ParquetFile(stream)
            present = [h for h in self._heads if h in parquet.schema_arrow.names]
            columns = parquet.read(columns=present, use_threads=False)
        self.files_read += 1
        for head in self._heads:
            if head not in columns.column_names:  # written before the key column existed
                columns = columns.append_column(head, pa.nulls(data_file.record_count))
        keys = FileKeys.of(composite(key_arrays(columns, self._id_columns)))
        self._cache.put(key, keys, keys.nbytes)
        return keys

    def _deleted(self, delete_files: Iterable[DataFile], path: str) -> np.ndarray | None:
        from pyiceberg.io.pyarrow import _read_deletes

        found = []
        for delete_file in delete_files:
            if delete_file.content != DataFileContent.POSITION_DELETES:
                raise ValueError(
                    f"{self._table.name()} has {delete_file.content.name.lower()} files, which upsert "
                    "commits cannot combine with; compact the table (rewrite_data_files) first"
                )
            key = f"deletes:{delete_file.file_path}"
            by_path = self._cache.get(key)
            if by_path is None:
                by_path = {p: c.to_numpy() for p, c in _read_deletes(self._io, delete_file).items()}
                self._cache.put(key, by_path, sum(a.nbytes + len(p) for p, a in by_path.items()))
            positions = by_path.get(path)
            if positions is not None:
                found.append(positions)
        return np.concatenate(found) if found else None

    def _scan(self, data_file: DataFile, delete_files: Iterable[DataFile]) -> Match | None:
        hits = self._file_keys(data_file).find(self._batch)
        if len(hits) == 0:
            return None
        hits = np.unique(hits)
        deleted = self._deleted(delete_files, data_file.file_path)
        if deleted is not None:
            hits = hits[~np.isin(hits, deleted)]
        return Match(data_file, hits) if len(hits) else None

    def locate(self) -> list[Match]:
        if self._table.metadata.current_snapshot() is None:
            return []
        tasks = list(self._table.scan(selected_fields=tuple(self._heads)).plan_files())
        wanted = [t for t in tasks if self._may_hold(t.file)]
        self.files_scanned = len(wanted)
        self.files_skipped = len(tasks) - len(wanted)
        with ThreadPoolExecutor(THREADS, thread_name_prefix="upsert-locate") as pool:
            found = pool.map(lambda t: self._scan(t.file, t.delete_files), wanted)
            return [m for m in found if m is not None]
