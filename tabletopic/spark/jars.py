"""Where Spark's extra jars come from: everything from PyPI, nothing from Maven at run time.

* The Iceberg Spark runtime (which already contains Iceberg's SQL extensions) ships inside the wheel
  ``snowpark-connect-deps-iceberg==1.0.2`` (1.0.3's jar lacks its shaded dependencies).
* Hadoop's s3a connector (``hadoop-aws-3.3.1`` + ``aws-java-sdk-bundle-1.11.901``) exists on PyPI only
  inside the 181 MB sdist ``sagemaker-pyspark==1.4.5``. It is downloaded once, on first use, with the
  ordinary pip client and just those two jars are kept in a cache directory
  (``$TABLETOPIC_JAR_CACHE``, default ``~/.cache/tabletopic/jars``).

``python -m tabletopic.spark.jars`` prefetches them (``make test`` does, so no test pays for it).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

ICEBERG_RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
ICEBERG_WHEEL_PACKAGE = "snowpark_connect_deps_iceberg"
S3A_SDIST = "sagemaker-pyspark==1.4.5"
S3A_JARS = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")


class JarNotFoundError(RuntimeError):
    """A jar Spark needs is missing; the message says which package provides it."""


def iceberg_runtime_jar() -> Path:
    """The Iceberg runtime jar inside the installed ``snowpark-connect-deps-iceberg`` wheel.

    Raises:
        JarNotFoundError: the wheel is not installed or ships a different jar.
    """
    import importlib.util

    spec = importlib.util.find_spec(ICEBERG_WHEEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise JarNotFoundError(
            f"{ICEBERG_WHEEL_PACKAGE} is not installed: pip install snowpark-connect-deps-iceberg==1.0.2"
        )
    for location in spec.submodule_search_locations:
        for candidate in (
            Path(location) / "jars" / ICEBERG_RUNTIME_JAR,
            Path(location) / ICEBERG_RUNTIME_JAR,
        ):
            if candidate.exists():
                return candidate
        found = sorted(Path(location).rglob(ICEBERG_RUNTIME_JAR))
        if found:
            return found[0]
    raise JarNotFoundError(
        f"{ICEBERG_RUNTIME_JAR} not found in {ICEBERG_WHEEL_PACKAGE}; "
        "install exactly snowpark-connect-deps-iceberg==1.0.2"
    )


def cache_dir() -> Path:
    """The jar cache: ``$TABLETOPIC_JAR_CACHE`` or ``$XDG_CACHE_HOME/tabletopic/jars``."""
    explicit = os.environ.get("TABLETOPIC_JAR_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tabletopic" / "jars"


def cached_s3a_jars() -> list[Path] | None:
    """The s3a jars if they are already cached, else ``None`` (never downloads)."""
    paths = [cache_dir() / name for name in S3A_JARS]
    return paths if all(p.exists() for p in paths) else None


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """An inter-process lock so parallel test workers or nodes download the sdist only once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_s3a_jars(timeout: float = 1800.0) -> list[Path]:
    """Return the s3a jars, downloading and extracting them on first use.

    Raises:
        JarNotFoundError: pip could not fetch the sdist or it lacks the jars.
    """
    found = cached_s3a_jars()
    if found is not None:
        return found
    target = cache_dir()
    with _exclusive(target / ".lock"):
        found = cached_s3a_jars()
        if found is not None:
            return found
        log.warning(
            "downloading %s (181 MB, once) for Hadoop's s3a connector into %s; "
            "prefetch with `python -m tabletopic.spark.jars`",
            S3A_SDIST,
            target,
        )
        with tempfile.TemporaryDirectory(dir=target, prefix="download-") as tmp:
            command = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--dest",
                tmp,
                S3A_SDIST,
            ]
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
            if result.returncode != 0:
                raise JarNotFoundError(f"pip download {S3A_SDIST} failed:\n{result.stderr[-2000:]}")
            archives = sorted(Path(tmp).glob("sagemaker_pyspark-*.tar.gz"))
            if not archives:
                raise JarNotFoundError(f"pip download {S3A_SDIST} produced no sdist in {tmp}")
            _extract_jars(archives[0], target)
    found = cached_s3a_jars()
    if found is None:
        raise JarNotFoundError(f"{S3A_SDIST} does not contain {', '.join(S3A_JARS)}")
    return found


def _extract_jars(archive: Path, target: Path) -> None:
    """Copy just the wanted jars out of the sdist; each lands under a temporary name first so a
    crash never leaves a truncated jar that looks complete."""
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            name = Path(member.name).name
            if name not in S3A_JARS or not member.isfile():
                continue
            source = tar.extractfile(member)
            if source is None:
                continue
            partial = target / f".{name}.partial"
            with source, open(partial, "wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
            partial.replace(target / name)


def main() -> None:
    """Prefetch every jar and print where each one is."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(iceberg_runtime_jar())
    for path in ensure_s3a_jars():
        print(path)


if __name__ == "__main__":
    main()
