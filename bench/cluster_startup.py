"""How long ``tabletopic cluster up`` takes to have PostgreSQL, SeaweedFS and its brokers up, each
run on a fresh directory: the servers started side by side (what ``LocalCluster.start`` does) against
the same servers started one after the other (the same-run baseline), alternating so both see the
same machine. Prints p50 and max of each and the ratio.

    .venv/bin/python bench/cluster_startup.py --nodes 3 --repeats 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from tabletopic.cluster.local import LocalCluster, PostgresServer, SeaweedFS


def one_after_another(cluster: LocalCluster) -> None:
    """The baseline: each server waits for the one before it."""
    cluster.root.mkdir(parents=True, exist_ok=True)
    cluster.postgres = PostgresServer(cluster.root / "postgres", keep=True).start()
    cluster.metadata_url = cluster.postgres.create_database("tabletopic")
    cluster.seaweedfs = SeaweedFS(cluster.root / "seaweedfs").start()
    for node_id in range(1, cluster.nodes + 1):
        cluster.add_broker(node_id)


def timed(nodes: int, together: bool) -> float:
    root = Path(tempfile.mkdtemp(prefix="startup-", dir="/var/tmp"))
    root.chmod(0o755)  # as root, PostgreSQL runs as the postgres user, who must reach its directory
    cluster = LocalCluster(root / "cluster", nodes=nodes, base_port=0)
    began = time.monotonic()
    try:
        if together:
            cluster.start()
        else:
            one_after_another(cluster)
        return time.monotonic() - began
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs: dict[bool, list[float]] = {False: [], True: []}
    for repeat in range(args.repeats):
        for together in (False, True):
            seconds = timed(args.nodes, together)
            runs[together].append(seconds)
            kind = "side by side" if together else "one after another"
            print(f"run {repeat + 1}: {kind}: {seconds:.1f} s", flush=True)
    serial, parallel = statistics.median(runs[False]), statistics.median(runs[True])
    print(f"\n{args.nodes} brokers, {args.repeats} runs each (p50, max):")
    print(f"  one after another (baseline): {serial:.1f} s, {max(runs[False]):.1f} s")
    print(f"  side by side (cluster up):    {parallel:.1f} s, {max(runs[True]):.1f} s")
    print(f"  ratio: {parallel / serial:.2f}x the baseline")


if __name__ == "__main__":
    main()
