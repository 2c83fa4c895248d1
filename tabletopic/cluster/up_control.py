"""Commands for a running ``tabletopic cluster up``: restart, add and stop one of its brokers.

The ``cluster up`` process owns the brokers' processes, so another command cannot start or stop one
itself: it asks through files in the cluster's data directory. ``tabletopic cluster add|stop|restart``
writes ``ACTION-N.request``; ``cluster up`` notices it within a second, acts, prints what it did and
writes ``ACTION-N.result`` (``ok: …`` or ``error: …``), which the command prints and exits on.

- **restart N**: stop broker N gracefully if it runs, start it again on the same ports.
- **add [N]**: start a new broker (the next id by default) on the documented ports of its id: it
  registers, and the controller's balancing rounds give it partitions. No data is copied.
- **stop N**: SIGTERM, as a supervisor scaling in would: the broker hands its partitions to the
  others (controlled shutdown) and exits; ``cluster up`` leaves it stopped. ``restart N`` starts it
  again; ``tabletopic cluster unregister N`` removes it for good.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tabletopic.cluster.db import ClusterSnapshot
    from tabletopic.cluster.local import LocalCluster

ACTIONS = ("restart", "add", "stop")
REQUEST = "{action}-{node_id}.request"
RESULT = "{action}-{node_id}.result"
# How long a broker asked to stop may take to hand its partitions over and exit before it is killed:
# controlled.shutdown.timeout.ms (10 s by default) and the stop after it.
STOP_GRACE_S = 60.0


class NotRunning(Exception):
    """No ``cluster up`` is running on the data directory (its cluster.json names none alive)."""


def running_cluster(data_dir: Path, cluster_file: str) -> dict[str, object]:
    """What the running ``cluster up`` on ``data_dir`` recorded, or :class:`NotRunning`."""
    try:
        recorded = json.loads((data_dir / cluster_file).read_text(encoding="utf-8"))
        os.kill(int(recorded["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NotRunning(str(data_dir)) from exc
    if not isinstance(recorded, dict):
        raise NotRunning(str(data_dir))
    return recorded


def next_broker_id(recorded: dict[str, object]) -> int:
    """The id ``cluster add`` gives a new broker: one past the highest the cluster up started."""
    brokers = recorded.get("brokers")
    ids = [b["node_id"] for b in brokers if isinstance(b, dict)] if isinstance(brokers, list) else []
    return max((i for i in ids if isinstance(i, int)), default=0) + 1


def not_started(metadata_url: str, started: set[int]) -> list[int]:
    """The brokers registered in the cluster (not unregistered) that this ``cluster up`` did not
    start: added by ``cluster add`` in an earlier run, beyond ``--nodes``. Without a word they would
    only show as dead in ``cluster status``. None named when the database does not answer."""
    try:
        snapshot = _snapshot(metadata_url)
    except Exception:
        return []
    return sorted(int(n) for n in snapshot.nodes if int(n) not in started)


def still_led_by(metadata_url: str, node_id: int) -> int | None:
    """How many partitions broker ``node_id`` still leads (user topics and coordinator slots); None
    when the metadata database does not answer (it may be restarting)."""
    try:
        snapshot = _snapshot(metadata_url)
    except Exception:
        return None
    return sum(1 for row in snapshot.partitions.values() if row.leader == node_id)


def _snapshot(metadata_url: str) -> ClusterSnapshot:
    from tabletopic import database
    from tabletopic.cluster.db import ClusterMetadata

    engine = database.create_engine(metadata_url)
    try:
        return ClusterMetadata(engine).snapshot()
    finally:
        engine.dispose()


def ask(data_dir: Path, action: str, node_id: int, timeout: float) -> tuple[bool, str]:
    """Ask the ``cluster up`` on ``data_dir`` to do ``action`` to broker ``node_id`` and wait for
    its answer: (whether it was done, the sentence that says what happened)."""
    result = data_dir / RESULT.format(action=action, node_id=node_id)
    result.unlink(missing_ok=True)
    (data_dir / REQUEST.format(action=action, node_id=node_id)).write_text("", encoding="utf-8")
    deadline = time.monotonic() + timeout
    while not result.exists():
        if time.monotonic() > deadline:
            return False, f"broker {node_id}: no answer from `cluster up` to {action} within {timeout:.0f} s"
        time.sleep(0.3)
    outcome = result.read_text(encoding="utf-8")
    result.unlink(missing_ok=True)
    status, _, message = outcome.partition(": ")
    return status == "ok", message


def serve_requests(cluster: LocalCluster, say: Callable[[str], None]) -> None:
    """In the ``cluster up`` process: carry out every request waiting in the data directory."""
    for request in sorted(cluster.root.glob("*.request")):
        action, _, rest = request.name.removesuffix(".request").partition("-")
        try:
            node_id = int(rest)
        except ValueError:
            request.unlink(missing_ok=True)
            continue
        if action not in ACTIONS:
            request.unlink(missing_ok=True)
            continue
        outcome = _carry_out(cluster, action, node_id, say)
        say(outcome.partition(": ")[2])
        (cluster.root / RESULT.format(action=action, node_id=node_id)).write_text(outcome, encoding="utf-8")
        request.unlink(missing_ok=True)


def _carry_out(cluster: LocalCluster, action: str, node_id: int, say: Callable[[str], None]) -> str:
    try:
        if action == "restart":
            return _restart(cluster, node_id, say)
        if action == "add":
            return _add(cluster, node_id, say)
        return _stop(cluster, node_id, say)
    except RuntimeError as exc:  # a start that failed: the message holds the log's tail
        return f"error: broker {node_id} did not start: {exc}"
    except Exception as exc:  # the cluster keeps running whatever one request met
        return f"error: {action} of broker {node_id} failed: {type(exc).__name__}: {exc}"
    finally:
        cluster.write_cluster_file()


def _restart(cluster: LocalCluster, node_id: int, say: Callable[[str], None]) -> str:
    if node_id not in cluster.brokers:
        return (
            f"error: there is no broker {node_id} (brokers: {', '.join(map(str, cluster.brokers))}); "
            f"`tabletopic cluster add --id {node_id}` starts a new one"
        )
    say(f"restarting broker {node_id} (asked by `tabletopic cluster restart`) …")
    node = cluster.restart_broker(node_id)
    return f"ok: broker {node_id} is up again (kafka {node.bootstrap}, pid {node.process_id})"


def _add(cluster: LocalCluster, node_id: int, say: Callable[[str], None]) -> str:
    known = cluster.brokers.get(node_id)
    if known is not None and known.process is not None:
        return f"error: broker {node_id} runs already (brokers: {', '.join(map(str, cluster.brokers))})"
    say(f"adding broker {node_id} (asked by `tabletopic cluster add`) …")
    node = cluster.restart_broker(node_id) if known is not None else cluster.add_broker(node_id)
    return (
        f"ok: broker {node_id} is up (rack {node.settings.get('broker.rack', '-')}, kafka {node.bootstrap}, "
        f"admin http://127.0.0.1:{node.admin_port}, pid {node.process_id}); the controller's balancing "
        "rounds give it partitions, no data copied (tabletopic cluster status)"
    )


def _stop(cluster: LocalCluster, node_id: int, say: Callable[[str], None]) -> str:
    node = cluster.brokers.get(node_id)
    if node is None or node.process is None:
        running = [str(n) for n, b in cluster.brokers.items() if b.process is not None]
        return f"error: broker {node_id} is not running (running: {', '.join(running) or 'none'})"
    say(f"stopping broker {node_id} (asked by `tabletopic cluster stop`): it hands its partitions over …")
    began = time.monotonic()
    cluster.stop_broker(node_id, STOP_GRACE_S)
    took = time.monotonic() - began
    then = (
        f"`tabletopic cluster restart {node_id}` starts it again, `tabletopic cluster unregister "
        f"{node_id}` removes it for good"
    )
    left = still_led_by(cluster.metadata_url, node_id)
    if left is None:
        return f"ok: broker {node_id} stopped ({took:.1f} s); {then}"
    if left:  # no live broker took them within controlled.shutdown.timeout.ms (none left, say)
        return (
            f"ok: broker {node_id} stopped ({took:.1f} s) without handing over {left} partitions and "
            "coordinator slots (no other live broker took them within controlled.shutdown.timeout.ms): "
            f"a live broker leads them once the controller places them (tabletopic cluster status); {then}"
        )
    handed = "after handing its partitions to the other brokers"
    return f"ok: broker {node_id} stopped ({took:.1f} s) {handed}; {then}"
