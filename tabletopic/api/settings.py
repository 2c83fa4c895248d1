"""Configuration keys of the console the admin listener serves."""

from tabletopic.config import define, in_range

CONSOLE_ENABLE = define(
    "admin.console.enable",
    bool,
    True,
    "Serve the web console at `/` of the admin listener (pages, plots, vendored scripts; no CDN).",
    "admin",
)
CONSOLE_SAMPLE_INTERVAL_MS = define(
    "admin.console.sample.interval.ms",
    int,
    5000,
    "How often the console samples the node's metrics into its in-memory time series.",
    "admin",
    in_range(100, 3_600_000),
)
CONSOLE_POINTS = define(
    "admin.console.points",
    int,
    720,
    "Samples kept per series (720 at 5 s = the last hour). Memory is at most "
    "points x (admin.console.max.series + 1) x 8 bytes (about 5.8 MB with the defaults).",
    "admin",
    in_range(2, 100_000),
)
CONSOLE_MAX_SERIES = define(
    "admin.console.max.series",
    int,
    1000,
    "Most time series the console keeps (node, topics, group partitions, tables); past it new "
    "series are not recorded.",
    "admin",
    in_range(1, 1_000_000),
)
SQL_ENABLE = define(
    "admin.sql.enable",
    bool,
    True,
    "Serve `POST /v1/sql` on the admin listener: Spark SQL in the node's warm Spark session, used by "
    "`tabletopic sql` (read-write users only, like every POST). Spark SQL runs as the node's process "
    "(it can read files the node can); turn it off where read-write admin users should not. Needs "
    "the Spark runner (`table.job.runner=spark`).",
    "admin",
)
