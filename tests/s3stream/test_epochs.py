"""The epoch history's answers, against Kafka's leader-epoch cache rules (KIP-101, KIP-320)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tabletopic.s3stream.epochs import NO_EPOCHS, EpochHistory


def test_a_stream_never_opened_with_an_epoch_is_epoch_zero_throughout() -> None:
    assert NO_EPOCHS.epoch_at(0) == NO_EPOCHS.epoch_at(10**9) == 0
    assert NO_EPOCHS.end_offset_for(0, log_end=42) == (0, 42)
    assert NO_EPOCHS.end_offset_for(3, log_end=42) == (-1, -1)  # newer than any: no answer
    assert NO_EPOCHS.end_offset_for(-1, log_end=42) == (-1, -1)


def test_an_epoch_that_wrote_nothing_ends_where_it_began() -> None:
    history = EpochHistory.of([(5, 10), (3, 10), (6, 12)])
    assert history.entries == ((3, 10), (5, 10), (6, 12))
    assert history.epoch_at(10) == 5  # epoch 3 wrote nothing: offset 10 was written under 5
    assert history.end_offset_for(3, log_end=20) == (3, 10)
    assert history.end_offset_for(4, log_end=20) == (3, 10)
    assert history.end_offset_for(6, log_end=20) == (6, 20)
    assert history.end_offset_for(2, log_end=20) == (2, 10)  # older than any: the first start
    assert history.end_offset_for(7, log_end=20) == (-1, -1)


@given(st.lists(st.integers(0, 50), min_size=1, max_size=8, unique=True), st.data())
def test_a_consumer_position_in_epoch_e_is_never_past_where_e_ended(
    epochs: list[int], data: st.DataObject
) -> None:
    # The log is never truncated, so validating any position a fetch gave out (its batch's
    # stamped epoch) never reports truncation.
    epochs.sort()
    starts = sorted(data.draw(st.lists(st.integers(0, 1000), min_size=len(epochs), max_size=len(epochs))))
    history = EpochHistory(tuple(zip(epochs, starts, strict=True)))
    log_end = starts[-1] + data.draw(st.integers(0, 100))
    offset = data.draw(st.integers(0, max(log_end - 1, 0)))
    epoch = history.epoch_at(offset)
    answered, end = history.end_offset_for(epoch, log_end)
    assert answered == epoch
    assert end >= offset
