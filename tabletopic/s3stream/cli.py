"""``tabletopic storage``: look at and check the storage engine's state without a running node."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from tabletopic.cli_common import (
    ConfigFileOption,
    DataDirOption,
    OverrideOption,
    console,
    err_console,
    load_config,
)

if TYPE_CHECKING:
    from tabletopic.config import Config
    from tabletopic.s3stream.db import StreamMetadata
    from tabletopic.s3stream.objectstore import LocalObjectStore, S3ObjectStore

storage_app = typer.Typer(
    help="Inspect and verify s3stream storage (streams, objects, WAL).", no_args_is_help=True
)


def _open(
    data_dir: DataDirOption, config: ConfigFileOption, override: OverrideOption
) -> tuple[Config, StreamMetadata, LocalObjectStore | S3ObjectStore]:
    from tabletopic import database, settings
    from tabletopic.s3stream.db import StreamMetadata
    from tabletopic.s3stream.objectstore import object_store_spec, open_object_store

    cfg = load_config(data_dir, config, override)
    url = cfg.get(settings.METADATA_URL) or database.default_url(cfg.data_dir)
    meta = StreamMetadata(database.create_engine(url))
    meta.migrate()
    return cfg, meta, open_object_store(object_store_spec(cfg))


@storage_app.command("status")
def status(
    data_dir: DataDirOption = None, config: ConfigFileOption = None, override: OverrideOption = None
) -> None:
    """Streams, committed objects by kind, and the local WAL's size."""
    from tabletopic.s3stream.config import StoreSettings
    from tabletopic.s3stream.wal import segment_files

    cfg, meta, store = _open(data_dir, config, override)
    streams = meta.load_streams()
    objects = meta.committed_objects()
    console.print(f"object store: {store.description}")
    console.print(f"streams: {len(streams)} open, {len(meta.deleted_streams())} deleted")
    for kind in sorted({o.kind for o in objects}):
        chosen = [o for o in objects if o.kind == kind]
        console.print(f"{kind} objects: {len(chosen)}, {sum(o.size for o in chosen)} bytes")
    wal_dir = StoreSettings.from_config(cfg).wal_dir
    segments = segment_files(wal_dir) if wal_dir.exists() else []
    console.print(f"WAL {wal_dir}: {len(segments)} segments, {sum(p.stat().st_size for p in segments)} bytes")


@storage_app.command("verify")
def verify(
    data_dir: DataDirOption = None, config: ConfigFileOption = None, override: OverrideOption = None
) -> None:
    """Read every committed object and check its footer, index and block checksums against the
    metadata DB. Exits 1 if any object is missing or damaged."""
    from tabletopic.s3stream.objects import parse_footer, parse_index, verify_block
    from tabletopic.s3stream.streams import StreamError

    _, meta, store = _open(data_dir, config, override)
    objects = meta.committed_objects()
    ranges = meta.ranges_of([o.object_id for o in objects])
    bad = 0
    for obj in objects:
        try:
            data = store.get(obj.object_key)
            if len(data) != obj.size:
                raise StreamError(f"has {len(data)} bytes, the metadata says {obj.size}")
            position, length, crc = parse_footer(data, len(data))
            blocks = parse_index(memoryview(data)[position : position + length], crc)
            for block in blocks:
                verify_block(
                    memoryview(data)[block.position : block.position + block.size], block, obj.object_key
                )
            for rng in ranges[obj.object_id]:
                inside = [b for b in blocks if b.stream_id == rng.stream_id and rng.position <= b.position]
                if not inside or inside[0].start_offset > rng.start_offset:
                    raise StreamError(
                        f"has no blocks for stream {rng.stream_id} from offset {rng.start_offset}"
                    )
        except StreamError as exc:
            bad += 1
            err_console.print(f"[red]object {obj.object_key}[/red]: {exc}")
    console.print(f"verified {len(objects)} objects: {len(objects) - bad} good, {bad} bad")
    if bad:
        raise typer.Exit(1)
