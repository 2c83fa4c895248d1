"""Schema registry figures for a 50-field Avro record.

Over HTTP against a registry process (SQLite metadata DB, the default):
  register rate (each version adds a defaulted field, so every registration runs a BACKWARD check),
  lookup-by-id rate (GET /schemas/ids/{id}), compatibility checks (POST /compatibility/...).
In process: lookup-by-id through the table pipeline's ``CachedSchemaLookup`` (cached and uncached)
and the pure compatibility check (``reader_can_read``).

Usage: python bench/registry_bench.py [--seconds 2] [--postgres | --metadata-url postgresql+psycopg://...]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tabletopic.config import Config  # noqa: E402
from tabletopic.schema_registry.client import CachedSchemaLookup  # noqa: E402
from tabletopic.schema_registry.formats.avro import FORMAT  # noqa: E402
from tabletopic.schema_registry.opening import open_registry  # noqa: E402

TYPES = ("int", "long", "string", "double", "boolean")


def record(fields: int, extra: int = 0) -> str:
    body: list[dict[str, object]] = [{"name": f"f{i}", "type": TYPES[i % len(TYPES)]} for i in range(fields)]
    body += [{"name": f"x{i}", "type": ["null", "string"], "default": None} for i in range(extra)]
    return json.dumps({"type": "record", "name": "Wide", "namespace": "bench", "fields": body})


def rate(label: str, seconds: float, step: Callable[[int], object], unit: str = "ops") -> float:
    done = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        step(done)
        done += 1
    elapsed = time.perf_counter() - start
    per_second = done / elapsed
    print(
        f"{label:<58} {per_second:>10.0f} {unit}/s  ({done} in {elapsed:.2f}s, "
        f"{1e6 * elapsed / done:.0f} µs each)"
    )
    return per_second


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(data_dir: str, metadata_url: str | None) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "tabletopic.schema_registry",
        "--data-dir",
        data_dir,
        "-o",
        f"schema.registry.listener=http://127.0.0.1:{port}",
        "-o",
        "log.level=WARNING",
    ]
    if metadata_url:
        args += ["-o", f"metadata.url={metadata_url}"]
    process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, env=dict(os.environ))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(url + "/", timeout=1).raise_for_status()
            return process, url
        except httpx.HTTPError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("registry did not start") from None
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--fields", type=int, default=50)
    parser.add_argument("--metadata-url", default=None)
    parser.add_argument("--postgres", action="store_true", help="run against a throwaway PostgreSQL server")
    args = parser.parse_args()
    seconds, fields = args.seconds, args.fields
    server = None
    if args.postgres:
        from tests.support.postgres import PostgresServer

        server = PostgresServer().start()
        args.metadata_url = server.create_database("registry_bench")
    try:
        run(args.metadata_url, seconds, fields)
    finally:
        if server is not None:
            server.stop()


def run(metadata_url: str | None, seconds: float, fields: int) -> None:

    with tempfile.TemporaryDirectory(prefix="registry-bench-") as data_dir:
        process, url = start_server(data_dir, metadata_url)
        try:
            print(f"registry at {url}, {fields}-field Avro record, {seconds:.1f}s per figure")
            with httpx.Client(base_url=url, timeout=30) as http:
                ids: list[int] = []

                def register(i: int) -> None:
                    response = http.post("/subjects/bench-value/versions", json={"schema": record(fields, i)})
                    response.raise_for_status()
                    ids.append(response.json()["id"])

                rate("HTTP register (new version + BACKWARD check)", seconds, register, "registrations")

                def register_other(i: int) -> None:
                    http.post(
                        f"/subjects/s{i}/versions", json={"schema": record(fields, 0)}
                    ).raise_for_status()

                rate("HTTP register (known schema, new subject)", seconds, register_other, "registrations")

                def again(_i: int) -> None:
                    http.post(
                        "/subjects/bench-value/versions", json={"schema": record(fields, 0)}
                    ).raise_for_status()

                rate("HTTP re-register (idempotent, answers existing id)", seconds, again, "registrations")

                def by_id(i: int) -> None:
                    http.get(f"/schemas/ids/{ids[i % len(ids)]}").raise_for_status()

                rate("HTTP GET /schemas/ids/{id}", seconds, by_id, "lookups")

                candidate = {"schema": record(fields, len(ids))}

                def compat(_i: int) -> None:
                    response = http.post(
                        "/compatibility/subjects/bench-value/versions/latest", json=candidate
                    )
                    response.raise_for_status()

                rate("HTTP POST /compatibility/.../versions/latest", seconds, compat, "checks")
        finally:
            process.terminate()
            process.wait(15)

        config = Config({"data.dir": data_dir, **({"metadata.url": metadata_url} if metadata_url else {})})
        engine, registry = open_registry(config)
        try:
            lookup = CachedSchemaLookup(registry)
            rate(
                "in-process lookup by id, cached (CachedSchemaLookup)",
                seconds,
                lambda i: lookup.by_id(ids[i % len(ids)]),
                "lookups",
            )
            rate(
                "in-process lookup by id, uncached (metadata DB)",
                seconds,
                lambda i: registry.registered_by_id(ids[i % len(ids)]),
                "lookups",
            )
        finally:
            registry.close()
            engine.dispose()

    old = FORMAT.parse(record(fields, 0), {})
    new = FORMAT.parse(record(fields, 1), {})
    assert FORMAT.reader_can_read(new, old) == []
    rate(
        "in-process reader_can_read (BACKWARD pair)",
        seconds,
        lambda _i: FORMAT.reader_can_read(new, old),
        "checks",
    )
    rate(
        "in-process parse of the 50-field schema",
        seconds,
        lambda _i: FORMAT.parse(record(fields, 1), {}),
        "parses",
    )


if __name__ == "__main__":
    main()
