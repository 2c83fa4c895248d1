"""The pure part of ``tables verify``: offset ranges and the comparison of topic and table."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tabletopic.table.ops import ranges as R
from tabletopic.table.ops.verify import compare, coverage_from_batches, coverage_from_offsets


def test_ranges_fold_offsets_and_subtract_and_intersect() -> None:
    assert R.from_offsets([5, 1, 2, 3, 9, 3]) == [(1, 4), (5, 6), (9, 10)]
    assert R.subtract([(0, 10), (20, 30)], [(2, 4), (8, 22)]) == [(0, 2), (4, 8), (22, 30)]
    assert R.intersect([(0, 10), (20, 30)], [(5, 25)]) == [(5, 10), (20, 25)]
    assert R.normalize([(5, 7), (0, 3), (3, 4), (6, 9), (10, 10)]) == [(0, 4), (5, 9)]
    assert R.describe([(0, 1), (3, 10)]) == "0, 3-9"


def test_coverage_finds_duplicates_with_their_copy_count() -> None:
    cov = coverage_from_offsets(np.array([0, 1, 2, 2, 3, 4, 4, 4, 7], dtype=np.int64))
    assert cov.rows == 9 and cov.present == [(0, 5), (7, 8)]
    assert cov.duplicates == [(2, 3, 2), (4, 5, 3)] and cov.duplicate_rows == 3


def test_a_table_holding_every_record_once_is_ok_and_gaps_and_duplicates_are_named() -> None:
    meta = pa.array(
        [{"partition": 0, "offset": o, "timestamp": 0} for o in [0, 1, 2, 4, 5, 5, 6, 9]]
        + [{"partition": 1, "offset": o, "timestamp": 0} for o in range(3)]
    )
    coverage = coverage_from_batches([pa.table({"_kafka_metadata": meta})])
    report = compare(
        "t",
        "default.t",
        1,
        committed={0: 9, 1: 3},
        log_starts={0: 0, 1: 0},
        # offset 7 of partition 0 is a transaction marker (no record); offset 8 went to the DLQ
        topic_records={0: [(0, 7), (8, 9)], 1: [(0, 3)]},
        skipped={0: [(8, 9)]},
        coverage=coverage,
    )
    first, second = report.partitions
    assert second.ok and second.expected == 3
    assert not report.ok
    assert first.missing == [(3, 4)]
    assert first.duplicates == [(5, 6, 2)]
    assert first.unexpected == [(9, 10)]  # a row beyond the committed offset
    assert first.skipped == 1 and first.expected == 7
    as_json = report.as_dict()
    assert as_json["partitions"][0]["missing"] == [[3, 4]] and as_json["ok"] is False


def test_rows_of_records_removed_by_retention_are_not_reported_missing_or_unexpected() -> None:
    coverage = {0: coverage_from_offsets(np.arange(0, 10, dtype=np.int64))}
    report = compare("t", "d.t", 1, {0: 10}, {0: 6}, {0: [(6, 10)]}, {}, coverage)
    (p,) = report.partitions
    assert p.ok and p.below_log_start == 6 and p.expected == 4


def test_an_upsert_table_is_expected_to_hold_the_latest_change_of_every_key_that_is_not_a_delete() -> None:
    from tabletopic.table.convert.rows import DELETE_MARKER_COLUMN
    from tabletopic.table.ops.verify import latest_row_offsets

    # (partition, offset, key, op, tombstone) in log order
    changes = [
        (0, 0, 1, "I", False),
        (0, 1, 2, "I", False),
        (1, 0, 3, "I", False),
        (0, 2, 1, "U", False),  # key 1's latest: offset 2
        (1, 1, 3, "D", False),  # key 3 deleted by its CDC operation
        (0, 3, 2, None, True),  # key 2 deleted by a tombstone
        (1, 2, 4, "I", False),
        (1, 3, 4, "U", False),  # key 4's latest: offset 3
    ]
    rows = pa.table(
        {
            "id": [c[2] for c in changes],
            "op": [c[3] for c in changes],
            "_kafka_metadata": [
                {"partition": c[0], "offset": c[1], "timestamp": i} for i, c in enumerate(changes)
            ],
            DELETE_MARKER_COLUMN: [c[4] for c in changes],
        }
    )
    assert latest_row_offsets(rows, ("id",), "op") == {0: [(2, 3)], 1: [(3, 4)]}
    # Without cdc.field the D is only data: key 3's latest row stays.
    assert latest_row_offsets(rows, ("id",), None) == {0: [(2, 3)], 1: [(1, 2), (3, 4)]}
