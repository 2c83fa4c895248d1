"""Small ingest jobs in a warm helper process of the node instead of a Spark job.

A Spark job costs about 0.5 s (1 s on a busy machine) before any work: planning, scheduling and
the hand-over of the items to a Python worker. With a 1 s commit interval that fixed cost is most of
each cycle and most of the produce-to-visible time, while the cycle's own work (about one interval
of records) is a few hundred milliseconds of one core. Jobs whose items hold at most
``table.job.local.max.bytes`` stored bytes therefore run here: one long-lived child Python process
(started with the Spark warm-up, so the imports and the native decoders are paid once) runs the
same task code as a Spark task (:class:`~tabletopic.table.ingest_task.InProcessRunner`), and larger
jobs (a backlog) still spread over Spark's cores.

It is a child process, not a thread of the broker: decoding holds the GIL for long stretches and
the broker's event loop must not wait on it, and the broker process never loads DataFusion or
ptars. It speaks length-prefixed pickles over its stdin and a duplicate of its stdout (fd 1 itself
goes to stderr, so a stray print cannot corrupt a reply). It exits when its stdin closes, so a node
killed with ``kill -9`` leaves no helper behind. The job's files are only written by the child;
the coordinator commits them as it commits a Spark job's, so exactly-once does not change. A child
that dies mid-job (out of memory, killed) costs that job a rerun on Spark and a new child next time.
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import threading
from typing import IO, Any

from tabletopic.table.job import JobResult, JobRunner, JobSpec

log = logging.getLogger(__name__)

_HEADER = 8


class HelperDied(RuntimeError):
    """The helper process went away during a job (its reply never came)."""


def _send(stream: IO[bytes], payload: Any) -> None:
    blob = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(blob).to_bytes(_HEADER, "big") + blob)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    header = stream.read(_HEADER)
    if len(header) < _HEADER:
        raise EOFError("helper stream closed")
    size = int.from_bytes(header, "big")
    blob = stream.read(size)
    if len(blob) < size:
        raise EOFError("helper stream closed mid-message")
    return pickle.loads(blob)


class JobProcess:
    """One warm helper process running jobs one at a time; restarted after it dies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        # Set while the warm-up holds the helper: a job then waits for it (a second or two) rather
        # than going to a Spark that may not have started yet either.
        self._warming = False

    def try_run(self, spec: JobSpec | None) -> JobResult | None:
        """Run ``spec`` (None: just start the process and its imports) unless another job is
        running there now; returns None then, so the caller uses Spark instead of queueing."""
        warm_up = spec is None
        if warm_up:
            self._warming = True  # before taking the lock: no job may slip to Spark meanwhile
        if not self._lock.acquire(blocking=self._warming and not warm_up):
            self._warming = self._warming and not warm_up
            return None
        try:
            return self._run(spec) or JobResult()
        finally:
            if warm_up:
                self._warming = False
            self._lock.release()

    def _run(self, spec: JobSpec | None) -> JobResult | None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            proc = self._proc = subprocess.Popen(
                [sys.executable, "-m", "tabletopic.table.job_process"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            _send(proc.stdin, spec)
            kind, payload = _receive(proc.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            self._kill()
            raise HelperDied(f"table job helper process died: {exc}") from exc
        if kind == "error":
            raise RuntimeError(f"ingest job failed in the helper process: {payload}")
        result: JobResult | None = payload
        return result

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def close(self) -> None:
        """Stop the helper: closing its stdin ends its loop; killed if it does not exit soon."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class SmallJobRunner:
    """Jobs of at most ``max_bytes`` stored bytes in the helper process, the others (and small ones
    while the helper is busy with another topic's job) on ``large``."""

    def __init__(self, large: JobRunner, max_bytes: int) -> None:
        self._large = large
        self._max_bytes = max_bytes
        self._helper = JobProcess()

    @property
    def helper(self) -> JobProcess:
        return self._helper

    def run(self, spec: JobSpec) -> JobResult:
        size = sum(item.size for item in spec.items)
        if spec.items and size <= self._max_bytes:
            try:
                result = self._helper.try_run(spec)
            except HelperDied:
                log.warning("topic %s: the table job helper process died; the job runs on Spark", spec.topic)
                result = None
            if result is not None:
                return result
        return self._large.run(spec)

    def warm(self) -> None:
        """Start the helper and pay its imports now (called with the Spark warm-up)."""
        self._helper.try_run(None)

    def close(self) -> None:
        self._helper.close()


def _warm() -> None:
    from tabletopic.table import ingest_task
    from tabletopic.table.convert import native_avro

    ingest_task.preload()
    native_avro.warm()


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """The helper's loop: a spec in, ``("ok", JobResult)`` or ``("error", message)`` out, until
    ``requests`` closes."""
    from tabletopic.table.ingest_task import InProcessRunner

    runner = InProcessRunner()
    while True:
        try:
            spec = _receive(requests)
        except EOFError:
            return
        try:
            if spec is None:
                _warm()
                reply: tuple[str, Any] = ("ok", None)
            else:
                reply = ("ok", runner.run(spec))
        except Exception as exc:  # reported to the coordinator, which retries the cycle
            log.exception("ingest job failed in the helper process")
            reply = ("error", f"{type(exc).__name__}: {exc}")
        _send(replies, reply)


def main() -> None:
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, never into a reply
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.WARNING, format="table job helper: %(levelname)s %(name)s: %(message)s")
    serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
