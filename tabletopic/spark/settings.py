"""Spark configuration keys.

Keys that are Spark's own properties keep Spark's names (``spark.master``, ``spark.driver.memory``),
and any other ``spark.*`` key set in the configuration is passed to the SparkSession untouched, so a
user tunes Spark exactly as in ``spark-defaults.conf``. Keys tabletopic itself interprets (declared
here, not listed in ``SPARK_NATIVE``) are never handed to Spark.
"""

from tabletopic.config import define, in_range, one_of

SPARK_MASTER = define(
    "spark.master",
    str,
    "local[*]",
    "Where Spark runs: `local[*]` (inside the node, all cores) or `spark://host:7077` for a standalone "
    "cluster once one machine is not enough.",
    "spark",
)
SPARK_DRIVER_MEMORY = define(
    "spark.driver.memory",
    str,
    "1g",
    "Heap of the Spark driver JVM (in local mode it also runs the tasks).",
    "spark",
)
SPARK_UI_ENABLED = define(
    "spark.ui.enabled",
    bool,
    False,
    "Serve Spark's web UI (port 4040). Off by default: one less port and a few MB of heap.",
    "spark",
)
SPARK_SHUFFLE_PARTITIONS = define(
    "spark.sql.shuffle.partitions",
    int,
    4,
    "Partitions after a shuffle. Spark's default of 200 is far too many for per-commit batches.",
    "spark",
    in_range(1),
)
SPARK_PASSTHROUGH = define(
    "spark.*",
    str,
    None,
    "Any other Spark property (e.g. `spark.executor.memory`, `spark.sql.adaptive.enabled`), passed to "
    "the SparkSession as is.",
    "spark",
)
SPARK_S3A = define(
    "spark.s3a.jars",
    str,
    "auto",
    "Put Hadoop's s3a connector (from the PyPI sdist sagemaker-pyspark==1.4.5, downloaded once into "
    "`$TABLETOPIC_JAR_CACHE`, default ~/.cache/tabletopic/jars) on Spark's classpath: `auto` (when "
    "a catalog uses S3 or the jars are already cached), `always` or `never`.",
    "spark",
    one_of("auto", "always", "never"),
)
SPARK_LOCAL_IP = define(
    "spark.local.ip",
    str,
    "127.0.0.1",
    "Address the Spark driver binds to and advertises (`spark.driver.host`/`bindAddress`, "
    "SPARK_LOCAL_IP). Loopback by default; set the node's address when executors run elsewhere.",
    "spark",
)

# Declared keys that are Spark properties. Every other *declared* ``spark.*`` key (these below, and
# any the ingest job adds) is tabletopic's own and never reaches Spark; undeclared ones always do.
SPARK_NATIVE = (SPARK_MASTER, SPARK_DRIVER_MEMORY, SPARK_UI_ENABLED, SPARK_SHUFFLE_PARTITIONS)
