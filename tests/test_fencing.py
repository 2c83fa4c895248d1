"""Every part's fencing refusal shares one root, so a caller that only needs "a newer owner took
over: step down" catches :class:`tabletopic.fencing.Fenced` once."""

from __future__ import annotations

import pytest

from tabletopic.broker.groups.store import GroupFenced
from tabletopic.broker.transactions.store import TxnFenced
from tabletopic.cluster.db import ClusterError, NodeFenced
from tabletopic.fencing import Fenced
from tabletopic.s3stream.streams import StorageUnavailable, StreamFenced
from tabletopic.table.lease import LeaseFenced


@pytest.mark.parametrize(
    "error",
    [
        StreamFenced("stream 7 reopened by a newer owner", (7,)),
        NodeFenced("broker 1 registered again"),
        GroupFenced("group slot moved"),
        TxnFenced("transaction slot moved"),
        LeaseFenced("lease taken over"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_each_fencing_error_is_caught_as_fenced(error: Exception) -> None:
    with pytest.raises(Fenced):
        raise error


def test_fencing_errors_keep_their_part_s_own_root() -> None:
    assert issubclass(StreamFenced, StorageUnavailable)  # still retriable storage trouble to s3stream
    assert issubclass(NodeFenced, ClusterError)
