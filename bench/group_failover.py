"""Consumer groups across the death of their group coordinator, or a rolling restart of every broker,
one protocol after the other on one 3-broker cluster (PostgreSQL, SeaweedFS, the fault run's
settings): what a consuming application sees when the broker that coordinates its group is killed
with kill -9 and started again, or when an operator restarts the brokers one by one (an upgrade).

Per protocol (classic with cooperative-sticky; KIP-848 ``group.protocol=consumer``): a topic of
``--partitions``, an idempotent acks=all producer at ``--rate`` records a second, a group of
``--members`` confluent-kafka consumers (auto-commit every 500 ms). Once every member holds
partitions and ``--baseline`` seconds more have passed, the fault: with ``--fault kill`` the
group's coordinator is killed and started again ``--down`` seconds later; with ``--fault rolling``
each broker in turn gets SIGTERM (controlled shutdown: it hands its partitions and coordinator
slots over, then exits), is started again at once, and ``--settle`` seconds pass before the next.
The writing goes on to ``--seconds`` (at least 5 s after the fault). The report, per protocol:

- acknowledged records, and those the group never read (must be 0),
- duplicate deliveries: records read more than once (a rebalance re-reads what was read but not yet
  committed; a coordinator move that keeps the members causes none),
- partitions the members gave up (revoked or lost) after the kill: 0 when the new coordinator
  carries the group on, all of them when it makes every member rejoin,
- seconds from the end of the writing until the group had read every record and committed the end,
- the longest any partition went without an acknowledgement, and the longest any member went
  without reading a record, among such gaps that overlap the fault (from its start to 5 s after its
  end), beside the same over the ``--baseline`` seconds before it (the same run's floor) and their
  ratio.

Usage: python bench/group_failover.py [--members 20] [--partitions 60] [--rate 850] [--seconds 45]
       [--down 10] [--protocols classic,consumer] [--fault kill|rolling] [--settle 10]
       [--baseline 10] [--keep]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from confluent_kafka.admin import AdminClient  # noqa: E402
from fault_run import RACKS, FaultRun, Writer, worst_gap  # noqa: E402

from tests.support.cluster import LocalCluster, wait_until  # noqa: E402
from tests.support.group_member import PROTOCOL_SETTINGS, GroupMember, committed_offsets, read_by  # noqa: E402
from tests.support.kafka_clients import create_topic  # noqa: E402


def run_protocol(cluster: LocalCluster, protocol: str, args: argparse.Namespace) -> str:
    topic, group_id = f"failover-{protocol}", f"failover-{protocol}-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, args.partitions)
    writer = Writer(cluster.bootstrap, topic, args.partitions, args.rate)
    began = time.monotonic()
    settings = PROTOCOL_SETTINGS[protocol]
    members = [GroupMember(cluster.bootstrap, topic, group_id, settings) for _ in range(args.members)]
    for member in members:
        member.start()
    wait_until(lambda: all(m.holds for m in members), timeout=120, interval=0.5)
    time.sleep(3)  # let the last rebalance's revocations settle before counting from the fault
    quiet = time.monotonic()
    time.sleep(args.baseline)
    taken_before = sum(m.taken for m in members)
    fault_began = time.monotonic()
    stable = fault_began - began - args.baseline
    print(f"  {protocol}: group stable after {stable:.1f} s; {fault(cluster, group_id, args)}")
    fault_ended = time.monotonic()
    time.sleep(max(5.0, args.seconds - (fault_ended - began)))
    writer.stop()
    stopped = time.monotonic()
    ends = writer.log.end_offsets()
    acked = {writer.log.values[position] for position in writer.log.acked}

    def caught_up() -> bool:
        if not acked <= set(read_by(members)):
            return False
        committed = committed_offsets(cluster.bootstrap, group_id, topic, ends)
        return all(committed[p] >= end for p, end in ends.items())

    try:
        wait_until(caught_up, timeout=120, interval=1)
        catch_up = f"{time.monotonic() - stopped:.1f} s"
    except TimeoutError:
        catch_up = "not within 120 s"
    taken = sum(m.taken for m in members) - taken_before  # before close() revokes everything
    for member in members:
        member.stop()
    seen = read_by(members)
    missing = len(acked - set(seen))
    duplicates = sum(n - 1 for value, n in seen.items() if n > 1)
    share = duplicates / max(len(acked), 1)
    reads = {index: member.read_at for index, member in enumerate(members)}
    fault_window = (fault_began, fault_ended + 5)
    ack_gap, read_gap = (worst_gap(times, *fault_window)[0] for times in (writer.acked_at, reads))
    # The floor counts only gaps inside the quiet seconds: the fault's own began in them.
    quiet_window = (quiet, fault_began)
    ack_floor, read_floor = (
        worst_gap(within(times, *quiet_window), *quiet_window)[0] for times in (writer.acked_at, reads)
    )
    counts = f"{len(acked):>8,} {missing:>8,} {duplicates:>11,} ({share:4.0%})"
    gaps = (
        f"{ack_gap:5.2f} s ({ack_floor:4.2f}, {ack_gap / max(ack_floor, 1e-9):4.1f}x) "
        f"{read_gap:5.2f} s ({read_floor:4.2f}, {read_gap / max(read_floor, 1e-9):4.1f}x)"
    )
    return f"{protocol:<9} {counts} {taken:>10,} {catch_up:>12}  {gaps}"


def within(times: dict[int, list[float]], start: float, end: float) -> dict[int, list[float]]:
    """Each series of ``times`` cut to the instants in ``[start, end]``."""
    return {key: [t for t in series if start <= t <= end] for key, series in times.items()}


def fault(cluster: LocalCluster, group_id: str, args: argparse.Namespace) -> str:
    """Bring about ``args.fault``; says what was done."""
    if args.fault == "rolling":
        steps = []
        for node in sorted(cluster.brokers):
            asked = time.monotonic()
            cluster.brokers[node].stop()  # SIGTERM: controlled shutdown
            stopped = time.monotonic()
            cluster.start(node, RACKS[node])
            steps.append(
                f"broker {node} stopped in {stopped - asked:.1f} s, up in {time.monotonic() - stopped:.1f} s"
            )
            time.sleep(args.settle)
        return "rolling restart: " + "; ".join(steps)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    coordinator = admin.describe_consumer_groups([group_id])[group_id].result(timeout=30).coordinator.id
    cluster.brokers[coordinator].kill()
    time.sleep(args.down)
    cluster.start(coordinator, RACKS[coordinator])
    return f"kill -9 of broker {coordinator} (its coordinator), started again {args.down:.0f} s later"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=60)
    parser.add_argument("--rate", type=int, default=850, help="records a second")
    parser.add_argument("--seconds", type=float, default=45, help="writing time of each protocol")
    parser.add_argument("--down", type=float, default=10, help="seconds the coordinator stays dead")
    parser.add_argument("--protocols", default="classic,consumer")
    parser.add_argument("--fault", choices=("kill", "rolling"), default="kill")
    parser.add_argument("--settle", type=float, default=10, help="rolling: seconds between brokers")
    parser.add_argument("--baseline", type=float, default=10, help="seconds measured before the fault")
    parser.add_argument("--keep", action="store_true", help="keep the data and logs")
    args = parser.parse_args()
    args.wal = "shared"
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    if unknown := [p for p in protocols if p not in PROTOCOL_SETTINGS]:
        parser.error(f"unknown protocols {unknown}; choose from {', '.join(PROTOCOL_SETTINGS)}")
    run = FaultRun(args, [], 0, random.Random(0))
    rows = []
    with run.rig("group_failover") as (cluster, _postgres, _s3):
        for protocol in protocols:
            rows.append(run_protocol(cluster, protocol, args))
        run.clean = True
    what = "a rolling restart" if args.fault == "rolling" else f"coordinator down {args.down:.0f} s"
    print(f"\n{args.members} members, {args.partitions} partitions, {args.rate} records/s, {what}")
    print(
        f"{'protocol':<9} {'acked':>8} {'missing':>8} {'duplicates':>18} {'given up':>10} {'caught up':>12}  "
        "ack gap (before, ratio)  read gap (before, ratio)"
    )
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
