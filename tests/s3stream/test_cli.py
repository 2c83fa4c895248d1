"""``tabletopic storage status|verify`` on a node's data directory."""

from __future__ import annotations

from typer.testing import CliRunner

from tabletopic.cli import app
from tests.support.store_harness import StoreHarness, payload_for


async def test_verify_reports_good_objects_then_a_damaged_one(local_harness: StoreHarness) -> None:
    store = await local_harness.open()
    sid = await store.create_stream()
    for i in range(5):
        await store.append(sid, payload_for(sid, i, 3000), 1)
    await store.flush()
    runner = CliRunner()
    data_dir = str(local_harness.root)
    status = runner.invoke(app, ["storage", "status", "--data-dir", data_dir])
    assert status.exit_code == 0, status.output
    assert "streams: 1 open" in status.output
    good = runner.invoke(app, ["storage", "verify", "--data-dir", data_dir])
    assert good.exit_code == 0 and "1 good, 0 bad" in good.output
    [piece] = await store.locate(sid, 0, 5)
    objects = local_harness.object_store()
    data = bytearray(objects.get(piece.object_key))
    data[100] ^= 0xFF
    objects.put(piece.object_key, bytes(data))
    bad = runner.invoke(app, ["storage", "verify", "--data-dir", data_dir])
    assert bad.exit_code == 1
    assert "CRC32C" in bad.output
