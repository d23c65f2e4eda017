"""The numpy array types the state is kept and judged in."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
BOOL = npt.NDArray[np.bool_]


def values_of(keys: npt.NDArray[np.integer], table: Mapping[int, int], default: int) -> I64:
    """``table``'s value of each key (``default`` where it has none): one dict lookup per
    distinct key, so that a column of a few brokers' ids over many partitions costs a
    handful of lookups."""
    if not table:
        return np.full(len(keys), default, dtype=np.int64)
    distinct, position = np.unique(keys, return_inverse=True)
    values = np.fromiter((table.get(int(k), default) for k in distinct), np.int64, len(distinct))
    result: I64 = values[position]
    return result
