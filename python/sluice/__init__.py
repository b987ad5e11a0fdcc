"""sluice: packet filters with libpcap's exact meaning, many at once, as
native code.

tcpdump's filter expressions (and classic BPF, CSPF, DPF programs) compiled
for a link type and run as machine code; many named filters merged into one
classifier; pcap and pcapng files read, written and split in one pass; FFPF
flows; live capture (``LiveCapture``) and flows of the sluice daemon
(``Daemon``). ``sluice.dask`` spreads ``split`` over a Dask cluster.

>>> import sluice
>>> f = sluice.Filter("tcp port 80")
>>> with sluice.open("examples/sample.pcap") as r:
...     hits = sum(f.matches(frame) for ts, frame in r)
>>> counts = sluice.split("examples/sample.pcap", {"web": "tcp port 80", "dns": "udp port 53"}, count=True)
>>> counts["web"] == hits
True

Errors are exceptions: ``sluice.FilterError`` (a ``ValueError``, with
``.message`` and ``.column``) for a filter that does not compile,
``sluice.CaptureError`` (a ``ValueError``, with ``.path`` and ``.offset``)
for a file that is not a sound capture, ``OSError`` subclasses for files
that cannot be opened.
"""

from ._sluice import (
    Batch,
    CaptureError,
    Classifier,
    Daemon,
    DaemonFlow,
    FilterError,
    Filter,
    FilterSet,
    Flow,
    FlowGroup,
    LiveCapture,
    Reader,
    Writer,
    wait_any,
)
from ._inputs import open, split
from ._tables import to_arrow, to_pandas

__version__ = "0.1.0"

__all__ = [
    "Batch",
    "CaptureError",
    "Classifier",
    "Daemon",
    "DaemonFlow",
    "Filter",
    "FilterError",
    "FilterSet",
    "Flow",
    "FlowGroup",
    "LiveCapture",
    "Reader",
    "Writer",
    "open",
    "split",
    "to_arrow",
    "to_pandas",
    "wait_any",
]
