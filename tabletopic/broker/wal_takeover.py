"""A broker's part in shared-WAL takeovers (``s3stream.wal.mode=shared`` in a cluster).

When a broker's lease expires, the controller names a live broker to take its WAL over (see
:func:`tabletopic.cluster.controller.assign_recoverers`) and leaves the dead broker's partitions
where they are. The broker named here fences the WAL directory, commits what it holds past the
recorded end offsets under the dead broker's streams (:func:`tabletopic.s3stream.shared_wal.recover_wal`),
marks it recovered in the cluster tables, and only then does the controller move the partitions,
whose new leaders open the streams at the ends the takeover left. The safety argument is in
``docs/cluster.md`` ("Shared WAL").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from pathlib import Path

from tabletopic import crashpoints
from tabletopic.cluster.controller import WalRow
from tabletopic.cluster.db import RETIRED
from tabletopic.cluster.node import ClusterNode
from tabletopic.s3stream.shared import SharedStreamStore
from tabletopic.s3stream.shared_wal import recover_wal, remove_wal
from tabletopic.s3stream.wal_fence import Role, TakeoverLost, WalFenced, WalToken
from tabletopic.tasks import cancel_and_wait, woken

log = logging.getLogger(__name__)

# After losing a race to another recoverer, wait this long before fencing again (the winner is
# usually done by then; if it died, the takeover goes on here).
RETRY_S = 2.0


class WalTakeovers:
    """Runs the takeovers the controller gives this broker, one at a time, as a background task."""

    def __init__(self, node: ClusterNode, store: SharedStreamStore) -> None:
        self.node = node
        self.store = store
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._not_before: dict[tuple[int, int], float] = {}
        # Streams earlier starts of this broker may still own: released once none of their shared
        # WALs is left to recover (:meth:`release_earlier_streams`).
        self._earlier_owned = True
        self._told_held: list[str] = []

    async def start(self) -> None:
        """After the node registered: mark the WALs the store took back at its start recovered,
        then follow the controller's takeover decisions. Brokers on the object WAL take part too
        (a cluster changing WAL kinds still has the shared WALs of its earlier brokers to recover),
        as long as they reach the recorded directories."""
        for wal in self.store.recovered_wals:
            await asyncio.to_thread(self.node.meta.wal_recovered, self.node.node_id, wal)
        await self.release_earlier_streams()
        self.node.on_change.append(lambda _snapshot: self._wake.set())
        self._task = asyncio.create_task(self._loop(), name="wal-takeovers")
        self._wake.set()

    async def release_earlier_streams(self) -> None:
        """Disown the streams earlier starts of this broker still hold, once none of their shared
        WALs is left to recover; called at start, before this start leads anything, and then by the
        leadership loop between its opens (never during one) until it has run.

        A stream with nothing left in such a WAL (all of it uploaded, or never written) is named by
        no recovery, so it kept this node as its owner; :meth:`held_elsewhere` then made every
        other broker to lead it wait for a close or a takeover that only the end of this start
        would bring (a restarted broker's former partitions moved elsewhere stayed unavailable for
        as long as it lived). When this start began while another broker was still taking over an
        earlier start's WAL, that takeover commits the streams its WAL names, and the rest are
        released here once it is done: every stream this node owns then belongs to an earlier start
        (whose acknowledged appends are committed) or is open here, and those open here are kept."""
        if not self._earlier_owned:
            return
        node = self.node
        taken_back = set(self.store.recovered_wals)
        pending = [
            w.wal
            for w in node.snapshot.wals
            if w.node_id == node.node_id and w.node_epoch != node.node_epoch and w.wal not in taken_back
        ]
        if pending:  # another broker's takeover will commit those, then its partitions move
            if pending != self._told_held:
                log.info("streams of earlier starts stay held until their WALs are recovered: %s", pending)
                self._told_held = pending
            return
        state = self.store.state
        released = await state.db(state.meta.disown, node.node_id, set(state.streams))
        self._earlier_owned = False
        if released:
            log.info(
                "released %d streams that earlier starts of broker %d still held", released, node.node_id
            )

    async def held_elsewhere(self, stream_ids: Iterable[int]) -> set[int]:
        """The streams among ``stream_ids`` a new leader must not open yet: the metadata database
        says another broker owns them that writes a shared WAL, or wrote one not recovered yet. It
        may have acknowledged appends that only its WAL holds; its close (which uploads them and
        clears the owner) or the takeover of its WAL (which commits them and clears the owner)
        comes first. Brokers on the object WAL acknowledge by committing: nothing to wait for."""
        shared = {w.node_id for w in self.node.snapshot.wals} - {self.node.node_id}
        wanted = sorted(stream_ids)
        if not shared or not wanted:
            return set()
        state = self.store.state
        owners = await state.db(state.meta.stream_ends, wanted)
        return {sid for sid, (_, owner) in owners.items() if owner in shared}

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    async def _loop(self) -> None:
        while True:
            await woken(self._wake, RETRY_S)
            if await self._deposed():
                return
            for row in self.node.my_wal_takeovers():
                key = (row.node_id, row.node_epoch)
                if time.monotonic() < self._not_before.get(key, 0.0):
                    continue
                try:
                    await self._take_over(row)
                except asyncio.CancelledError:
                    raise
                except TakeoverLost as exc:
                    log.info("shared WAL takeover of broker %d: %s; retrying later", row.node_id, exc)
                    self._not_before[key] = time.monotonic() + RETRY_S
                except Exception:
                    log.exception("shared WAL takeover of broker %d failed; retrying", row.node_id)
                    self._not_before[key] = time.monotonic() + RETRY_S

    async def _deposed(self) -> bool:
        """Whether this broker's own WAL failed, so that every append now fails: taken over by
        another broker (it was paused or cut off past its lease), then leave the cluster for good
        (as retired, so that the controller gives this incarnation nothing more) and end the node;
        failed a write, then hand the partitions over and end the node. Either way a restart joins
        again with a new WAL."""
        wal = self.store.state.wal
        if wal is None or wal.failure is None:
            return False
        node = self.node
        if not isinstance(wal.failure, WalFenced):
            # A failed write (a full disk, an I/O error): what it acknowledged is still uploaded,
            # so the partitions move as on SIGTERM, with no takeover, as Kafka moves leaders off a
            # broker whose log directory failed. Left in place they would refuse every write.
            log.error(
                "the shared WAL of broker %d failed: %s; it hands its partitions to the other brokers "
                "and stops (started again, it joins with a new WAL)", node.node_id, wal.failure,
            )  # fmt: skip
            node.hand_over(f"its shared WAL failed ({wal.failure})")
            return True
        log.error(
            "%s; broker %d leaves the cluster and stops (a restart joins again)", wal.failure, node.node_id
        )
        try:
            await asyncio.to_thread(node.meta.set_state, node.node_id, node.node_epoch, RETIRED, True)
        except Exception as exc:
            log.warning("could not record broker %d as retired: %s", node.node_id, exc)
        node.leave(f"its shared WAL was taken over by another broker ({wal.failure})")
        return True

    async def _take_over(self, row: WalRow) -> None:
        store = self.store
        settings = store.state.settings
        directory = Path(row.wal)
        token = WalToken.here(Role.FENCED, self.node.node_id, store.wal_incarnation or "-")
        started = time.monotonic()
        # That incarnation is over from here on, even if it wakes and renews its lease before the
        # fence below: retired, it can neither renew nor be counted live, so the controller never
        # hands partitions back to a broker whose WAL can acknowledge nothing more.
        await asyncio.to_thread(self.node.meta.set_state, row.node_id, row.node_epoch, RETIRED, True)
        result = await asyncio.to_thread(
            recover_wal,
            directory,
            row.node_id,
            token,
            store.state.meta,
            store.state.objects.store,
            settings,
            lambda: crashpoints.crash_point("wal_takeover.after_fence"),
        )
        await asyncio.to_thread(self.node.meta.wal_recovered, row.node_id, row.wal)
        await asyncio.to_thread(remove_wal, directory)
        log.info(
            "took over the shared WAL of broker %d (node epoch %d) in %.2fs: %d records of %d streams "
            "committed (%d bytes); its partitions may move now",
            row.node_id,
            row.node_epoch,
            time.monotonic() - started,
            result.records,
            result.streams,
            result.bytes,
        )
        self._not_before.pop((row.node_id, row.node_epoch), None)
