"""The allocator settings `tabletopic serve` applies at start (see tabletopic.allocator)."""

from __future__ import annotations

import platform

import pytest

from tabletopic import allocator


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_glibc_takes_every_setting() -> None:
    # mallopt answers 0 for a value it refuses: the chosen ones must all be taken.
    assert allocator.tune_for_large_buffers() is True


def test_the_settings_stay_within_glibcs_documented_limits() -> None:
    assert allocator.MMAP_THRESHOLD_BYTES <= 32 << 20
    assert allocator.TOP_PAD_BYTES <= allocator.TRIM_THRESHOLD_BYTES
