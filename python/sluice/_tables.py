"""Results that are tables, as Arrow tables (pyarrow is optional: only
these two functions need it), so pandas, polars and DuckDB read them
directly."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._sluice import Batch


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError(
            "sluice.to_arrow needs pyarrow: pip install pyarrow (or sluice[arrow])"
        ) from e
    return pyarrow


def to_arrow(result: Any) -> Any:
    """A ``pyarrow.Table`` of a result that is a table.

    * a ``sluice.Batch``: columns ``timestamp`` (timestamp[ns, UTC]),
      ``wirelen``, ``linktype`` and ``frame`` (large_binary, sharing the
      batch's buffer, not copied);
    * a dict of counts (from ``sluice.split`` or ``sluice.dask``): ``name``
      and ``packets``;
    * the ``(frame, filter)`` pair of arrays from
      ``Classifier.classify_batch``: columns ``frame`` and ``filter``.

    >>> import sluice
    >>> t = sluice.to_arrow(sluice.split("examples/sample.pcap", {"ip": "ip"}, count=True))
    >>> t.column_names
    ['name', 'packets']
    """
    pa = _pyarrow()
    if isinstance(result, Batch):
        n = len(result)
        frames = pa.Array.from_buffers(
            pa.large_binary(),
            n,
            [None, pa.py_buffer(result.offsets), pa.py_buffer(result.data)],
        )
        return pa.table(
            {
                "timestamp": pa.array(result.timestamps_ns, pa.timestamp("ns", tz="UTC")),
                "wirelen": pa.array(result.wirelens),
                "linktype": pa.array(result.linktypes),
                "frame": frames,
            }
        )
    if isinstance(result, dict):
        return pa.table(
            {
                "name": pa.array(list(result.keys()), pa.string()),
                "packets": pa.array(list(result.values()), pa.uint64()),
            }
        )
    if isinstance(result, tuple) and len(result) == 2:
        frame, filt = (np.asarray(a) for a in result)
        return pa.table({"frame": pa.array(frame), "filter": pa.array(filt)})
    raise TypeError(f"no table for {type(result).__name__}")


def to_pandas(result: Any) -> Any:
    """``to_arrow(result).to_pandas()`` (needs pyarrow and pandas)."""
    return to_arrow(result).to_pandas()
