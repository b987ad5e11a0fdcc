"""Results that are tables, as Arrow tables (pyarrow is optional: only
these two functions need it; ``pip install sluice-pf[arrow]`` or
``[pandas]``), so pandas, polars and DuckDB read them directly."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import numpy as np

from ._sluice import Batch


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError(
            "sluice.to_arrow needs pyarrow: pip install pyarrow (or sluice-pf[arrow])"
        ) from e
    return pyarrow


def to_arrow(result: Any) -> Any:
    """A ``pyarrow.Table`` of a result that is a table.

    * a ``sluice.Batch``: columns ``timestamp`` (timestamp[ns, UTC]),
      ``wirelen``, ``linktype`` and ``frame`` (large_binary, sharing the
      batch's buffer, not copied);
    * a dict of counts (from ``sluice.split`` or ``sluice.dask``), or
      ``sluice.split(..., stats=True)``'s dict: ``name`` and ``packets``;
    * a flow's report (``Flow.run()``, ``Flow.report()``), or a list of
      them: one row per element, ``spec``, ``packets``, ``delivered``,
      ``drops`` (the flow's), ``class``, ``instance``, ``element``,
      ``count`` (the element's result when it is a number, else null) and
      ``result`` (the result as JSON text);
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
    if _is_report(result) or (
        isinstance(result, list) and result and all(_is_report(r) for r in result)
    ):
        return _reports(pa, result if isinstance(result, list) else [result])
    if isinstance(result, dict) and isinstance(result.get("counts"), dict):
        result = result["counts"]
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


def _is_report(r: Any) -> bool:
    return isinstance(r, dict) and "spec" in r and isinstance(r.get("filters"), list)


def _reports(pa: Any, reports: List[Dict[str, Any]]) -> Any:
    cols: Dict[str, List[Any]] = {
        k: [] for k in ("spec", "packets", "delivered", "drops", "class", "instance", "element", "count", "result")
    }
    for r in reports:
        for f in r["filters"]:
            for k in ("spec", "packets", "delivered", "drops"):
                cols[k].append(r.get(k))
            for k in ("class", "instance", "element"):
                cols[k].append(f[k])
            v = f["result"]
            cols["count"].append(v if isinstance(v, int) and not isinstance(v, bool) else None)
            cols["result"].append(json.dumps(v))
    types = {"packets": pa.uint64(), "delivered": pa.uint64(), "drops": pa.uint64(), "count": pa.uint64()}
    return pa.table({k: pa.array(v, types.get(k, pa.string())) for k, v in cols.items()})


def to_pandas(result: Any) -> Any:
    """``to_arrow(result).to_pandas()`` (needs pyarrow and pandas:
    ``pip install sluice-pf[pandas]``)."""
    try:
        import pandas  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("sluice.to_pandas needs pandas: pip install sluice-pf[pandas]") from e
    return to_arrow(result).to_pandas()
