"""Offset ranges: half-open ``[start, end)`` intervals, sorted and disjoint, built from offsets and
combined with set arithmetic. Verify, redrive and rebuild report and plan in these terms, so a
result stays small however many records it covers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

Range = tuple[int, int]


def from_sorted_unique(offsets: np.ndarray) -> list[Range]:
    """Runs of consecutive integers in a sorted array without repeats."""
    if offsets.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(offsets) != 1) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [offsets.size]))
    return [(int(offsets[s]), int(offsets[e - 1]) + 1) for s, e in zip(starts, ends, strict=True)]


def from_offsets(offsets: Iterable[int]) -> list[Range]:
    return from_sorted_unique(np.unique(np.fromiter(offsets, dtype=np.int64)))


def normalize(ranges: Iterable[Range]) -> list[Range]:
    """Sorted, merged (touching or overlapping ranges joined), empty ones dropped."""
    result: list[Range] = []
    for start, end in sorted(r for r in ranges if r[1] > r[0]):
        if result and start <= result[-1][1]:
            result[-1] = (result[-1][0], max(result[-1][1], end))
        else:
            result.append((start, end))
    return result


def subtract(a: Sequence[Range], b: Sequence[Range]) -> list[Range]:
    """Offsets in ``a`` and not in ``b`` (both normalized)."""
    result: list[Range] = []
    j = 0
    for start, end in a:
        cursor = start
        while j < len(b) and b[j][1] <= cursor:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cursor:
                result.append((cursor, b[k][0]))
            cursor = max(cursor, b[k][1])
            k += 1
        if cursor < end:
            result.append((cursor, end))
    return result


def intersect(a: Sequence[Range], b: Sequence[Range]) -> list[Range]:
    """Offsets in both ``a`` and ``b`` (both normalized)."""
    result: list[Range] = []
    i = j = 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            result.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return result


def count(ranges: Iterable[Range]) -> int:
    return sum(end - start for start, end in ranges)


def describe(ranges: Sequence[Range], limit: int = 8) -> str:
    """``3, 10-19, 40`` (inclusive ends, as people read offsets), cut after ``limit`` ranges."""
    shown = [str(s) if e == s + 1 else f"{s}-{e - 1}" for s, e in ranges[:limit]]
    if len(ranges) > limit:
        shown.append(f"... ({len(ranges) - limit} more)")
    return ", ".join(shown)
