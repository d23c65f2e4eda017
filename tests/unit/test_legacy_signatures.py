"""The health signature of this release against the one the oldest pickled snapshots
kept (``streaming.job.state_format.legacy_signatures``): the first batch after such a
snapshot is restored compares with the legacy one, and every batch after it with the new
one, so both must call the same partitions equal, or a restore would write too much or
too little."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from state import NO_FOLLOWER, health_signatures
from streaming.job.state_format import legacy_signatures
from tests.unit.test_health_signature import Row, frame_of, signatures

brokers = st.integers(-1, 4)
broker_lists = st.lists(st.integers(0, 4), max_size=4)
slots = st.lists(
    st.tuples(
        brokers, st.sampled_from((NO_FOLLOWER, NO_FOLLOWER, 0, 1, 2, 3, 4, 5, 6)), st.booleans()
    ),
    max_size=5,
)
optional_time = st.none() | st.integers(0, 3)


@st.composite
def health_rows(draw: st.DrawFn) -> Row:
    """A partition's health facts from small domains, so that equal rows are frequent."""
    return {
        "leader": draw(brokers),
        "leader_epoch": draw(st.integers(0, 2)),
        "replicas": tuple(draw(broker_lists)),
        "isr": tuple(draw(broker_lists)),
        "flags": tuple(draw(st.lists(st.booleans(), min_size=5, max_size=5))),
        "metadata_state": draw(st.integers(0, 2)),
        "stale_brokers": draw(broker_lists),
        "blackout": (draw(optional_time), draw(optional_time)),
        "slots": draw(slots),
        "as_of_ms": draw(st.integers(0, 10)),
        "high_watermark": draw(st.integers(0, 10)),
        "leader_leo": draw(st.integers(0, 10)),
        "lag": (draw(st.integers(0, 10)), draw(st.integers(0, 10))),
    }


FIELDS = (
    "leader",
    "leader_epoch",
    "replicas",
    "isr",
    "flags",
    "metadata_state",
    "stale_brokers",
    "blackout",
    "slots",
    "as_of_ms",
    "high_watermark",
    "leader_leo",
    "lag",
)


@st.composite
def frames(draw: st.DrawFn) -> tuple[list[Row], int]:
    """Rows, and among them variants of earlier rows with a few facts redrawn."""
    rows = draw(st.lists(health_rows(), min_size=1, max_size=6))
    for _ in range(draw(st.integers(0, 12))):
        base = rows[draw(st.integers(0, len(rows) - 1))]
        fresh = draw(health_rows())
        redrawn = draw(st.lists(st.sampled_from(FIELDS), max_size=3))
        variant = {**base, **{name: fresh[name] for name in redrawn}}
        if draw(st.booleans()):  # the same followers in other replica slots
            variant["slots"] = draw(relaid(variant["slots"]))
        rows.append(variant)
    return rows, draw(st.integers(0, 7))


def relaid(slots: list[tuple[int, int, bool]]) -> st.SearchStrategy[list[tuple[int, int, bool]]]:
    """``slots`` with its followers in the same order and empty slots put anywhere."""
    followers = [slot for slot in slots if slot[1] != NO_FOLLOWER]
    empty = st.tuples(brokers, st.just(NO_FOLLOWER), st.booleans())
    return st.lists(st.tuples(st.integers(0, len(followers)), empty), max_size=3).map(
        lambda gaps: _with_gaps(followers, gaps)
    )


def _with_gaps(
    followers: list[tuple[int, int, bool]], gaps: list[tuple[int, tuple[int, int, bool]]]
) -> list[tuple[int, int, bool]]:
    out = list(followers)
    for at, slot in sorted(gaps, reverse=True):
        out.insert(at, slot)
    return out


@settings(max_examples=300, deadline=None)
@given(frames())
def test_signatures_are_equal_exactly_when_the_legacy_ones_are(
    generated: tuple[list[Row], int],
) -> None:
    rows, width = generated
    frame = frame_of(rows, width)
    new = health_signatures(frame).tolist()
    legacy = legacy_signatures(frame)
    for i in range(len(rows)):
        for j in range(len(rows)):
            assert (new[i] == new[j]) == (legacy[i] == legacy[j]), (rows[i], rows[j])
    # and a row's signature does not depend on the frame around it
    for i, row in enumerate(rows):
        assert signatures([row])[0] == new[i]
