"""glibc allocator settings for a node that keeps hundreds of megabytes of produce requests.

A produce request's records stay in memory, in the buffer the request was read into, until the log
cache lets them go (``s3stream.log.cache.bytes``). With glibc's defaults each such buffer of a
megabyte or so is either mapped afresh or carved from heap memory that was handed back to the
kernel when the cache last shrank, so every page of every request is faulted in again: at 1 KiB
messages that was a quarter of a million page faults per GB produced, more CPU than the Kafka
protocol path. Keeping freed memory in the process (a high trim threshold and top pad) and serving
large buffers from the heap (a fixed mmap threshold) lets the next requests reuse the pages the
evicted ones held.

The bound on memory does not change: the heap holds what the caches are configured to hold, and
what it keeps after they shrink is at most ``TRIM_THRESHOLD_BYTES`` above that.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform

log = logging.getLogger(__name__)

# mallopt parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD_BYTES = 32 << 20  # mallopt(3)'s documented maximum on 64-bit; larger requests are still mapped
TRIM_THRESHOLD_BYTES = 256 << 20
TOP_PAD_BYTES = 64 << 20


def tune_for_large_buffers() -> bool:
    """Apply the settings above if the process runs on glibc; returns whether they took effect."""
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    applied = all(
        mallopt(parameter, value) == 1
        for parameter, value in (
            (M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
            (M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
            (M_TOP_PAD, TOP_PAD_BYTES),
        )
    )
    if not applied:
        log.warning("glibc refused an allocator setting; large buffers keep glibc's defaults")
    return applied
