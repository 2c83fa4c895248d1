"""Every table topic of a cluster, from any broker's admin API.

A table topic's pipeline runs on one broker, the leader of the topic's partition 0 (its
coordinator), and what ``/v1/tables`` shows of it (state, lag, the last error, a pause) lives in
that broker's memory. So a broker answers for the topics it coordinates itself and asks the other
live brokers' admin APIs for the rest: each registers where it serves it (``cluster_nodes.admin_url``).
The caller's credentials go along, so a peer applies the same authentication and roles. A request a
broker passes on carries :data:`FORWARDED`: the peer then answers for itself alone, so no request
goes round while a partition moves. A peer that does not answer within :data:`PEER_TIMEOUT_S` is
shown as :data:`UNREACHABLE` with the reason, so one stopped broker never hangs a listing.

A single node answers for itself: it coordinates every table topic there is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
from sqlalchemy.engine import Engine

from tabletopic.api import cluster_view
from tabletopic.cluster.db import ClusterMetadata
from tabletopic.log_limit import RateLimitedLog
from tabletopic.table.coordinator import PipelineState, PipelineStatus
from tabletopic.table.table_config import ENABLE, TableTopicConfig
from tabletopic.table.tables import identifier

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

log = logging.getLogger(__name__)
_peer_log = RateLimitedLog(log, 60.0)

FORWARDED = "x-tabletopic-forwarded"
PEER_TIMEOUT_S = 5.0
# Listed for a topic whose coordinator did not answer (its last_error says why).
UNREACHABLE = "UNREACHABLE"
# What of the caller's request goes along to the peer: its credentials.
_PASSED_ON = ("authorization",)
# Figures of a status that only the coordinator knows: empty in a stub.
_KNOWN_TO_THE_COORDINATOR = (
    "lag_records",
    "lag_seconds",
    "rows_committed",
    "records_skipped",
    "tombstones_skipped",
    "records_lost_to_retention",
    "commits",
)
# A row from a broker that no longer coordinates the topic (it moved away, or it lost the lease).
_LEFT_BEHIND = (str(PipelineState.STOPPED), str(PipelineState.FENCED))


class PeerError(Exception):
    """A table topic's coordinator could not be asked; the message says which broker and why."""


@dataclass(frozen=True, slots=True)
class PeerAnswer:
    status_code: int
    body: Any


def passed_on(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers of a caller's request that go along when it is forwarded."""
    found = {name: headers[name] for name in _PASSED_ON if name in headers}
    return {**found, FORWARDED: "1"}


def stub(topic: str, table: str, state: str, error: str | None) -> dict[str, Any]:
    """A row of ``/v1/tables`` for a topic whose coordinator had nothing to say of it: every field
    a status has, the figures only its coordinator knows empty."""
    row = PipelineStatus(topic=topic, table=table).as_dict()
    return {**row, **dict.fromkeys(_KNOWN_TO_THE_COORDINATOR), "state": state, "last_error": error}


class TablePeers:
    """Finds which broker coordinates a table topic and asks its admin API."""

    def __init__(
        self,
        service: Callable[[], BrokerService | None],
        engine: Engine | None,
        tls: dict[str, Any] | None = None,
    ) -> None:
        self._service = service
        self._engine = engine
        self._tls = tls or {}

    @property
    def node_id(self) -> int | None:
        service = self._service()
        return None if service is None else service.node_id

    def clustered(self) -> bool:
        return cluster_view.clustered(self._service(), self._engine)

    def table_topics(self) -> list[str]:
        service = self._service()
        if service is None:
            return []
        return sorted(
            t.name for t in service.topics.all() if t.configs.get(ENABLE, "false").lower() == "true"
        )

    def table_name(self, topic: str) -> str:
        """``namespace.table`` of a table topic, as its configs name it ("" if they cannot)."""
        service = self._service()
        found = None if service is None else service.topics.get(topic)
        if found is None:
            return ""
        try:
            return ".".join(
                identifier(TableTopicConfig.from_topic_configs(dict(found.configs), topic=topic), topic)
            )
        except Exception:  # invalid configs: the coordinator reports those, not the listing
            return ""

    def coordinator_of(self, topic: str) -> int | None:
        """The broker that runs ``topic``'s pipeline: the leader of its partition 0."""
        service = self._service()
        if service is None or service.topics.get(topic) is None:
            return None
        return int(service.leadership.leader(topic, 0)[0])

    async def admin_urls(self) -> dict[int, str]:
        """The live brokers' admin URLs, this broker's left out."""
        if self._engine is None:
            return {}
        found = await asyncio.to_thread(ClusterMetadata(self._engine).admin_urls)
        return {int(n): url for n, url in found.items() if int(n) != self.node_id}

    async def ask(
        self, node_id: int, url: str | None, method: str, path: str, headers: Mapping[str, str]
    ) -> PeerAnswer:
        """``method path`` on broker ``node_id``'s admin API, as the caller (its credentials).

        Raises:
            PeerError: no admin URL for it, or no answer within PEER_TIMEOUT_S.
        """
        if url is None:
            raise PeerError(f"broker {node_id} is not alive or serves no admin API (admin.listener)")
        try:
            async with httpx.AsyncClient(timeout=PEER_TIMEOUT_S, **self._tls) as client:
                response = await client.request(method, url.rstrip("/") + path, headers=passed_on(headers))
        except httpx.HTTPError as exc:
            reason = f"broker {node_id} did not answer at {url}: {type(exc).__name__} {exc}".rstrip()
            _peer_log.warning(f"peer:{node_id}", "%s", reason)
            raise PeerError(reason) from exc
        try:
            body = response.json()
        except ValueError:
            body = {"detail": response.text}
        return PeerAnswer(response.status_code, body)

    async def listing(
        self, local: list[dict[str, Any]], headers: Mapping[str, str], urls: dict[int, str] | None = None
    ) -> list[dict[str, Any]]:
        """``local`` (this broker's rows) with every other table topic of the cluster: each from the
        broker that coordinates it, else a stub saying why there is nothing better. ``urls``: the
        :meth:`admin_urls` a caller has read already."""
        if not self.clustered():
            return local
        # Who coordinates what, as this broker sees it when it asks (not once the answers are in).
        expected = {topic: self.coordinator_of(topic) for topic in self.table_topics()}
        urls = await self.admin_urls() if urls is None else urls
        answers = await asyncio.gather(
            *(self.ask(n, url, "GET", "/v1/tables", headers) for n, url in urls.items()),
            return_exceptions=True,
        )
        rows: dict[int, list[dict[str, Any]]] = {self.node_id or 0: local}
        failed: dict[int, str] = {}
        for node_id, answer in zip(urls, answers, strict=True):
            if isinstance(answer, PeerAnswer) and answer.status_code == 200 and isinstance(answer.body, list):
                rows[node_id] = answer.body
            elif isinstance(answer, PeerAnswer):
                failed[node_id] = f"broker {node_id} answered {answer.status_code}: {answer.body}"
            else:
                failed[node_id] = str(answer)
        return self._merge(expected, rows, failed)

    def _merge(
        self, expected: dict[str, int | None], rows: dict[int, list[dict[str, Any]]], failed: dict[int, str]
    ) -> list[dict[str, Any]]:
        by_topic: dict[str, dict[int, dict[str, Any]]] = {}
        for node_id, listed in rows.items():
            for row in listed:
                by_topic.setdefault(str(row["topic"]), {})[node_id] = {**row, "coordinator": node_id}
        out = []
        for topic in sorted(set(expected) | set(by_topic)):
            owner = expected.get(topic)
            found = by_topic.get(topic, {})
            current = [row for row in found.values() if row["state"] not in _LEFT_BEHIND]
            if owner in found:
                out.append(found[owner])
            elif current:
                out.append(current[0])
            elif owner is not None and owner not in rows:
                why = (
                    failed.get(owner) or f"broker {owner} is not alive: its partitions move to another broker"
                )
                out.append({**stub(topic, self.table_name(topic), UNREACHABLE, why), "coordinator": owner})
            else:
                # Its partition 0 has just moved: the new leader is starting the pipeline.
                starting = str(PipelineState.STARTING)
                out.append({**stub(topic, self.table_name(topic), starting, None), "coordinator": owner})
        return out
