"""Transactions through random faults on a 3-broker cluster, judged as a user of exactly-once would.

The cluster, the faults and the supervisor are :mod:`fault_run`'s; the workload is the exactly-once
pipeline of :mod:`tests.support.exactly_once`: a transactional writer that commits its transactions
of 1 to 6 records (or aborts one in four on purpose) on an input topic, and a group of two
read_committed members copying every record to an output topic, committing their offsets in the same
transaction. Then the writing stops and the run checks, reading both topics read_committed:

- every transaction the writer saw committed is visible whole, exactly once;
- no transaction it saw aborted (on purpose, or after a failed commit) shows a record;
- a transaction whose outcome the writer could not learn (its producer failed fatally) is visible
  whole or not at all, never in part;
- the output holds every visible input record exactly once, and nothing else;
- no transaction is left hanging: on every partition the last stable offset reaches the high
  watermark within the transaction timeout;
- the group committed the end of every input partition, and no broker hung.

Usage: python bench/txn_fault_run.py [--seconds 300] [--txn-rate 20] [--every 20-40] [--seed N]
       [--wal shared|object] [--faults "kill -9 broker,SIGTERM"] [--keep]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fault_run import answers, fault_arguments  # noqa: E402

from tests.support.exactly_once import CopyingGroup, TransactionalWriter, judge  # noqa: E402
from tests.support.kafka_clients import create_topic  # noqa: E402

PARTITIONS = 6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--txn-rate", type=float, default=20, help="writer transactions a second")
    run = fault_arguments(parser)
    with run.rig("txnfaults") as (cluster, postgres, s3):
        source, sink = "payments-in", "payments-out"
        for topic in (source, sink):
            create_topic(cluster.bootstrap, topic, PARTITIONS)
        writer = TransactionalWriter(
            cluster.bootstrap, source, PARTITIONS, run.args.txn_rate, run.rng.random()
        )
        group = CopyingGroup(cluster.bootstrap, source, sink, PARTITIONS).start()
        faults = run.faults(cluster, postgres, s3)
        writer.stop()
        verdict = judge(writer, group, faults[-1][2] if faults else time.monotonic())
        hung = [n for n in cluster.running() if not answers(cluster, n)]
        print()
        print("\n".join(verdict.lines()))
        print(f"writer restarted {writer.restarts}x; copying transactions {group.committed} committed, "
              f"{group.aborted} aborted")  # fmt: skip
        print(f"brokers hung: {hung or 'none'}")
        run.clean = verdict.clean and not hung


if __name__ == "__main__":
    main()
