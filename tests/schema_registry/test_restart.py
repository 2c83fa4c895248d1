"""A registry process stopped and started over the same data dir keeps everything it answered."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.support.registry_process import RegistryProcess

pytestmark = pytest.mark.integration


def schema(*names: str) -> str:
    fields = [{"name": n, "type": "int", "default": 0} for n in names]
    return json.dumps({"type": "record", "name": "R", "fields": fields})


def test_restart_keeps_ids_versions_configs_modes_and_soft_deletes(tmp_path: Path) -> None:
    server = RegistryProcess(tmp_path / "data").start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            for names in (("a",), ("a", "b"), ("a", "b", "c")):
                assert http.post("/subjects/s/versions", json={"schema": schema(*names)}).status_code == 200
            assert http.post("/subjects/other/versions", json={"schema": schema("a")}).json() == {"id": 1}
            http.post("/subjects/gone/versions", json={"schema": schema("z")})  # id 4
            http.delete("/subjects/gone")
            assert http.delete("/subjects/gone?permanent=true").json() == [1]
            assert http.delete("/subjects/s/versions/2").json() == 2
            http.put("/config", json={"compatibility": "FULL"})
            http.put("/config/s", json={"compatibility": "NONE"})
            http.put("/mode/other", json={"mode": "READONLY"})
    finally:
        server.stop()

    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            assert http.get("/subjects").json() == ["other", "s"]
            assert http.get("/subjects/s/versions").json() == [1, 3]
            assert http.get("/subjects/s/versions", params={"deleted": "true"}).json() == [1, 2, 3]
            assert http.get("/subjects/s/versions/3").json()["id"] == 3
            assert http.get("/config").json() == {"compatibilityLevel": "FULL"}
            assert http.get("/config/s").json() == {"compatibilityLevel": "NONE"}
            assert http.get("/mode/other").json() == {"mode": "READONLY"}
            assert http.get("/schemas/ids/4").status_code == 404
            # The permanently deleted id 4 is never handed out again.
            assert http.post("/subjects/s/versions", json={"schema": schema("d")}).json() == {"id": 5}
            assert http.post("/subjects/s/versions", json={"schema": schema("a")}).json() == {"id": 1}
    finally:
        server.stop()


def test_every_acknowledged_id_survives_kill_9(tmp_path: Path) -> None:
    """With the default ``schema.registry.sqlite.synchronous=NORMAL`` a commit does not wait for an
    fsync, so this checks the promise that remains: an id answered to a client is in the operating
    system's hands and survives the process dying at once (SIGKILL right after the last answer,
    with registrations from several clients in flight and group-committed)."""
    import signal
    import threading

    server = RegistryProcess(tmp_path / "data").start()
    acknowledged: dict[tuple[str, int], int] = {}
    lock = threading.Lock()

    def client(worker: int) -> None:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            for n in range(25):
                names = [f"w{worker}_{i}" for i in range(n + 1)]
                answer = http.post(f"/subjects/k{worker}/versions", json={"schema": schema(*names)})
                assert answer.status_code == 200, answer.text
                with lock:
                    acknowledged[(f"k{worker}", n + 1)] = answer.json()["id"]

    try:
        threads = [threading.Thread(target=client, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert server.process is not None
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(10)
    finally:
        server.stop()

    assert len(acknowledged) == 100
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            for (subject, version), schema_id in acknowledged.items():
                assert http.get(f"/subjects/{subject}/versions/{version}").json()["id"] == schema_id
                assert http.get(f"/schemas/ids/{schema_id}").status_code == 200
            # The counter came back too: the next id is a new one.
            fresh = http.post("/subjects/k0/versions", json={"schema": schema("fresh")}).json()["id"]
            assert fresh > max(acknowledged.values())
    finally:
        server.stop()
