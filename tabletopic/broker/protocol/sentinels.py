"""Values Kafka's schemas give a meaning to inside ordinary fields, shared by the handlers that read
them and the broker's own clients that send them (the last stable offset asked of a leader).
"""

from __future__ import annotations

# Fetch and ListOffsets ``isolation_level``: everything, or only what committed transactions wrote.
READ_UNCOMMITTED, READ_COMMITTED = 0, 1

# ListOffsets ``timestamp``: not a time but which offset is asked for.
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
