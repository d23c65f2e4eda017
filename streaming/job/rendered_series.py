"""Metric families that change only with a micro-batch, rendered once per batch.

On a large cluster most of ``/metrics`` is the per-partition and per-follower series of
the unhealthy partitions (30,000 of 31,000 series at 100,000 partitions with 5 % of them
unhealthy: ``bench/faults/scrapes.py``). Rendering them costs seconds of CPU under the
GIL, and they only change when a batch ends (every trigger, 5 s by default), while every
Prometheus server, every replica of it and every ad-hoc ``curl`` scrapes. Rendered per
scrape, 20 scrapes a second asked for 40 s of CPU a second: every scrape timed out and
the batches' own sink, on the same interpreter, slowed down tenfold. Here they are
rendered by the first scrape after a batch, once per exposition format (and compressed
once), and every other scrape until the next batch reuses the bytes; concurrent scrapes
wait for that one rendering instead of each doing it.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

Encoder = Callable[[Any], bytes]
"""An exposition encoder of ``prometheus_client`` (``choose_encoder``'s first value)."""

GZIP_LEVEL = 6
"""zlib's default: a tenth of level 9's CPU for a few percent more bytes."""


class _Families:
    """A collector of the families a function gives (for a registry of their own)."""

    def __init__(self, families: Callable[[], Iterable[Metric]]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families()


class RenderedOnce:
    """The exposition bytes of some families, kept until :meth:`changed` is called."""

    def __init__(self, families: Callable[[], Iterable[Metric]]) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_Families(families))
        self._generation = 0
        self._cache: dict[tuple[str, bool], tuple[int, bytes]] = {}
        self._render_lock = threading.Lock()  # one rendering at a time; the others wait
        self.renderings = 0  # how many times the families were rendered (for tests)

    def changed(self) -> None:
        """The families' input changed (a batch ended): render them again when asked."""
        self._generation += 1  # one bytecode under the GIL; a scrape may see either value

    def render(self, encoder: Encoder, content_type: str, *, compressed: bool) -> bytes:
        """The families in the format of ``content_type`` (``encoder``'s), gzip-compressed
        as one gzip member if ``compressed``. For OpenMetrics, the bytes end with the
        ``# EOF`` line: they go last in a scrape."""
        with self._render_lock:
            generation = self._generation
            plain = self._cached((content_type, False), generation)
            if plain is None:
                plain = encoder(self._registry)
                self.renderings += 1
                self._cache[(content_type, False)] = (generation, plain)
            if not compressed:
                return plain
            packed = self._cached((content_type, True), generation)
            if packed is None:
                packed = gzip.compress(plain, GZIP_LEVEL)
                self._cache[(content_type, True)] = (generation, packed)
            return packed

    def _cached(self, key: tuple[str, bool], generation: int) -> bytes | None:
        cached = self._cache.get(key)
        return cached[1] if cached is not None and cached[0] == generation else None
