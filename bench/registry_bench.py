"""Schema registry figures over HTTP for a 50-field Avro record, against a registry process.

Clients: plain keep-alive HTTP (``http.client``, one connection per client process) and
confluent-kafka's ``SchemaRegistryClient``. Each figure is measured with one client and with
several client processes at once (the server's capacity), and printed with the issue's target, the
ratio to it, the server's CPU time per request (read from /proc: less sensitive than a rate to
other load on a shared machine), the clients' CPU time per request, and the "CPU ceiling": the
rate the machine's cores could reach if client and server only needed CPU (cores / both CPU
times). A figure near its ceiling is bound by CPU, and the client's share says whose. The
same-run baseline is the cheapest request there is (``GET /``): no registry endpoint can be faster
over the same HTTP stack. Last, the client CPU of confluent-kafka's uncached ``get_schema`` split
into its HTTP request and the building of its result.

Figures:
  lookup by id (``GET /schemas/ids/{id}``): uncached = the client keeps no cache (every lookup is
      a request); cached = confluent-kafka's client answering repeats from its own cache;
  register: each registration swaps the last, optional field for a new one with a default, so
      every one is a new 50-field version with a BACKWARD check against the previous;
  compatibility check: ``POST /compatibility/subjects/{s}/versions/latest``;
  register with ``schema.registry.sqlite.synchronous=FULL`` (an fsync per commit) as the same-run
      baseline of the default ``NORMAL`` (SQLite only).
In process: the pure BACKWARD check and the parse of the 50-field schema.

Usage: python bench/registry_bench.py [--seconds 3] [--clients 4] [--postgres | --metadata-url URL]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tabletopic.cluster.local import free_port  # noqa: E402
from tabletopic.schema_registry.formats.avro import FORMAT  # noqa: E402

TYPES = ("int", "long", "string", "double", "boolean")
CONTENT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
TARGETS = {"lookup-uncached": 5000.0, "lookup-cached": 20000.0, "register": 500.0, "compat": 1000.0}


def record(fields: int, version: int = 0, prefix: str = "x") -> str:
    """Version ``version`` of a ``fields``-field record: the last field is an optional one named
    after the version, so each version drops the previous one's and adds its own with a default
    (BACKWARD compatible, always ``fields`` wide)."""
    body: list[dict[str, object]] = [
        {"name": f"f{i}", "type": TYPES[i % len(TYPES)]} for i in range(fields - 1)
    ]
    body.append({"name": f"{prefix}{version}", "type": ["null", "string"], "default": None})
    return json.dumps({"type": "record", "name": "Wide", "namespace": "bench", "fields": body})


def start_server(
    data_dir: str, metadata_url: str | None, overrides: tuple[str, ...] = ()
) -> tuple[subprocess.Popen[bytes], int]:
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
    for override in overrides:
        args += ["-o", override]
    process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, env=dict(os.environ))
    deadline = time.monotonic() + 60
    while True:
        try:
            status, _ = request(http.client.HTTPConnection("127.0.0.1", port, timeout=1), "GET", "/")
            if status == 200:
                return process, port
        except OSError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError("registry did not start")
        time.sleep(0.1)


def request(conn: http.client.HTTPConnection, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    payload = None if body is None else json.dumps(body).encode()
    conn.request(method, path, body=payload, headers=CONTENT)
    response = conn.getresponse()
    return response.status, response.read()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- client workloads (each runs in its own process) -----------------------------------------------


def _keepalive(port: int, kind: str, worker: int, seconds: float, shared: dict[str, Any]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    ids: list[int] = shared["ids"]
    fields: int = shared["fields"]
    subject = f"bench-w{worker}-value"
    done = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        if kind == "probe":
            status, _ = request(conn, "GET", "/")
        elif kind == "lookup":
            status, _ = request(conn, "GET", f"/schemas/ids/{ids[done % len(ids)]}")
        elif kind == "register":
            status, _ = request(
                conn, "POST", f"/subjects/{subject}/versions", {"schema": record(fields, done, f"w{worker}_")}
            )
        else:
            status, _ = request(
                conn, "POST", "/compatibility/subjects/bench-value/versions/latest", shared["candidate"]
            )
        if status != 200:
            raise RuntimeError(f"{kind}: HTTP {status}")
        done += 1
    return done


def _confluent(port: int, kind: str, worker: int, seconds: float, shared: dict[str, Any]) -> int:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    client = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"})
    ids: list[int] = shared["ids"]
    done = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        if kind == "uncached":
            client.clear_caches()
        client.get_schema(ids[done % len(ids)])
        done += 1
    return done


def _run_worker(args: tuple[Callable[..., int], int, str, int, float, dict[str, Any]]) -> tuple[int, float]:
    """Requests done and the client's own CPU seconds (user + system, its threads included)."""
    fn, port, kind, worker, seconds, shared = args
    start = time.process_time()
    done = fn(port, kind, worker, seconds, shared)
    return done, time.process_time() - start


def measure(
    label: str,
    server_pid: int,
    fn: Callable[..., int],
    port: int,
    kind: str,
    seconds: float,
    clients: int,
    shared: dict[str, Any],
    target: str | None = None,
) -> float:
    cpu_before = cpu_seconds(server_pid)
    start = time.perf_counter()
    jobs = [(fn, port, kind, w, seconds, shared) for w in range(clients)]
    if clients == 1:
        results = [_run_worker(jobs[0])]
    else:
        with multiprocessing.get_context("fork").Pool(clients) as pool:
            results = pool.map(_run_worker, jobs)
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds(server_pid) - cpu_before
    done = max(sum(count for count, _ in results), 1)
    per_second = done / max(elapsed, seconds)
    server_us = 1e6 * cpu / done
    client_us = 1e6 * sum(used for _, used in results) / done
    # What this machine's cores could serve if client and server were each only CPU: when the
    # figure sits near it, the clients' own CPU, not the server, is what limits the rate.
    ceiling = (os.cpu_count() or 1) * 1e6 / max(server_us + client_us, 1e-9)
    against = ""
    if target is not None:
        goal = TARGETS[target]
        against = f"  target {goal:>6.0f}/s  ratio {per_second / goal:5.2f}"
    print(
        f"{label:<56} {per_second:>8.0f}/s  server {server_us:>6.0f} µs CPU/req  client {client_us:>6.0f}"
        f" µs CPU/req  CPU ceiling {ceiling:>7.0f}/s{against}",
        flush=True,
    )
    return per_second


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--fields", type=int, default=50)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--metadata-url", default=None)
    parser.add_argument("--postgres", action="store_true", help="run against a throwaway PostgreSQL server")
    args = parser.parse_args()
    server = None
    if args.postgres:
        from tests.support.postgres import PostgresServer

        server = PostgresServer().start()
        args.metadata_url = server.create_database("registry_bench")
    try:
        run(args.metadata_url, args.seconds, args.fields, args.clients)
    finally:
        if server is not None:
            server.stop()


def client_costs(port: int, schema_id: int, seconds: float) -> None:
    """Where confluent-kafka's uncached ``get_schema`` spends the client's CPU: the whole call, its
    HTTP request alone (the client's own httpx session, same headers) and building the result from
    the parsed body. Client CPU per call (process time), one client."""
    from confluent_kafka.schema_registry import RegisteredSchema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"})
    session = client._rest_client.session  # the client's own connection pool
    url = f"http://127.0.0.1:{port}/schemas/ids/{schema_id}"
    accept = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
    body = session.get(url, headers=accept).json()

    def uncached() -> None:
        client.clear_caches()
        client.get_schema(schema_id)

    for label, step in (
        ("confluent-kafka get_schema uncached, whole call", uncached),
        ("  of which its httpx GET + JSON parse", lambda: session.get(url, headers=accept).json()),
        ("  of which RegisteredSchema.from_dict", lambda: RegisteredSchema.from_dict(body)),
    ):
        done, start, cpu = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - start < seconds / 3:
            step()
            done += 1
        print(f"{label:<56} {1e6 * (time.process_time() - cpu) / done:>8.0f} µs client CPU per call")


def run(metadata_url: str | None, seconds: float, fields: int, clients: int) -> None:
    with tempfile.TemporaryDirectory(prefix="registry-bench-") as data_dir:
        process, port = start_server(data_dir, metadata_url)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            ids = []
            for i in range(20):
                status, body = request(
                    conn, "POST", "/subjects/bench-value/versions", {"schema": record(fields, i)}
                )
                assert status == 200, body
                ids.append(json.loads(body)["id"])
            shared = {"ids": ids, "fields": fields, "candidate": {"schema": record(fields, len(ids))}}
            print(
                f"registry on port {port}, {fields}-field Avro record, {seconds:.1f}s per figure, "
                f"{os.cpu_count()} cores (shared machine: load {os.getloadavg()[0]:.1f})"
            )
            pid = process.pid
            for n in (1, clients):
                tag = f"{n} client{'s' if n > 1 else ''}"
                measure(
                    f"baseline GET / (keep-alive, {tag})", pid, _keepalive, port, "probe", seconds, n, shared
                )
                measure(
                    f"GET /schemas/ids/{{id}} uncached (keep-alive, {tag})",
                    pid,
                    _keepalive,
                    port,
                    "lookup",
                    seconds,
                    n,
                    shared,
                    "lookup-uncached",
                )
                measure(
                    f"get_schema uncached (confluent-kafka, {tag})",
                    pid,
                    _confluent,
                    port,
                    "uncached",
                    seconds,
                    n,
                    shared,
                    "lookup-uncached",
                )
                measure(
                    f"get_schema cached (confluent-kafka, {tag})",
                    pid,
                    _confluent,
                    port,
                    "cached",
                    seconds,
                    n,
                    shared,
                    "lookup-cached",
                )
                measure(
                    f"register + BACKWARD check (keep-alive, {tag})",
                    pid,
                    _keepalive,
                    port,
                    "register",
                    seconds,
                    n,
                    shared,
                    "register",
                )
                measure(
                    f"compatibility check (keep-alive, {tag})",
                    pid,
                    _keepalive,
                    port,
                    "compat",
                    seconds,
                    n,
                    shared,
                    "compat",
                )
            client_costs(port, ids[0], seconds)
        finally:
            process.terminate()
            process.wait(15)

    if metadata_url is None:
        # Same-run baseline of the durability setting: every commit waiting for an fsync.
        with tempfile.TemporaryDirectory(prefix="registry-bench-full-") as data_dir:
            process, port = start_server(data_dir, None, ("schema.registry.sqlite.synchronous=FULL",))
            try:
                shared = {"ids": [], "fields": fields, "candidate": None}
                measure(
                    "register + BACKWARD check, sqlite.synchronous=FULL (1 client)",
                    process.pid,
                    _keepalive,
                    port,
                    "register",
                    seconds,
                    1,
                    shared,
                    "register",
                )
            finally:
                process.terminate()
                process.wait(15)

    old = FORMAT.parse(record(fields, 0), {})
    new = FORMAT.parse(record(fields, 1), {})
    assert FORMAT.reader_can_read(new, old) == []
    for label, step in (
        ("in-process reader_can_read (BACKWARD pair)", lambda: FORMAT.reader_can_read(new, old)),
        ("in-process parse of the 50-field schema", lambda: FORMAT.parse(record(fields, 1), {})),
    ):
        done, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            step()
            done += 1
        elapsed = time.perf_counter() - start
        print(f"{label:<56} {done / elapsed:>8.0f}/s  ({1e6 * elapsed / done:.0f} µs each)")


if __name__ == "__main__":
    main()
