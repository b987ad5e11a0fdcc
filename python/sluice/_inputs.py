"""Where captures come from: paths on this machine, or URLs read through
fsspec (``file://``, ``http(s)://`` with range requests, ``s3://`` where
s3fs is installed, and every other protocol fsspec knows).

The rule: a relative path is made absolute where the caller is (so a Dask
worker in another directory reads the same file), a ``file://`` URL is a
path, and any other URL is opened with fsspec where it is read; a missing
fsspec (or protocol package) is an ImportError that says what to install.
"""

from __future__ import annotations

import builtins
import os
import re
from typing import Any, Optional, Tuple, Union

from . import _sluice

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")

Source = Union[str, "os.PathLike[str]", Any]


def is_url(source: Any) -> bool:
    """Whether `source` is a URL (``scheme://...``) rather than a path."""
    return isinstance(source, str) and bool(_URL.match(source))


def absolute(source: Source) -> Source:
    """A path made absolute here (``file://`` URLs become paths); URLs and
    file objects as they are."""
    if hasattr(source, "read"):
        return source
    if is_url(source):
        if source.startswith("file://"):
            return os.path.abspath(source[len("file://") :])
        return source
    return os.path.abspath(os.fspath(source))


def _fsspec() -> Any:
    try:
        import fsspec
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError(
            "reading URLs needs fsspec (and aiohttp for http, s3fs for s3): pip install sluice-pf[http]"
        ) from e
    return fsspec


def open_url(url: str) -> Any:
    """A binary file object for a URL, read with range requests where the
    protocol has them."""
    return _fsspec().open(url, "rb").open()


def size(source: Source) -> int:
    """The size in bytes of a path or URL."""
    source = absolute(source)
    if is_url(source):
        fs, path = _fsspec().core.url_to_fs(source)
        return int(fs.size(path))
    return os.stat(source).st_size


def compressed(source: Source) -> Optional[str]:
    """``"gzip"`` or ``"zstd"`` when the capture is compressed (read whole,
    never in byte ranges), else ``None``."""
    source = absolute(source)
    f = open_url(source) if is_url(source) else builtins.open(source, "rb")
    with f:
        head = f.read(4)
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd"
    return None


def opened(source: Source) -> Tuple[Any, Optional[str], bool]:
    """What the native functions take for `source`: a path, or a file
    object with its name and whether it must be closed after."""
    source = absolute(source)
    if is_url(source):
        return open_url(source), source, True
    return source, None, False


def open(source: Source, name: Optional[str] = None) -> "_sluice.Reader":  # noqa: A001
    """Open a capture: a path, a URL (``http://``, ``s3://``, ``file://``...
    through fsspec) or a file object; pcap or pcapng, gzip or zstd
    compressed or not.

    >>> with sluice.open("examples/sample.pcap") as r:
    ...     r.format
    'pcap'
    """
    if hasattr(source, "read"):
        return _sluice.open(source, name=name)
    src, url, owned = opened(source)
    return _sluice.open(src, name=name or url, close=owned)


def split(source: Source, filters: Any, out_dir: Any = None, count: bool = False, **kw: Any) -> Any:
    """``sluice._sluice.split`` on a path, URL or file object (see
    ``help(sluice.split)``)."""
    src, url, owned = opened(source) if not hasattr(source, "read") else (source, None, False)
    try:
        return _sluice.split(src, filters, out_dir, count, name=kw.pop("name", None) or url, **kw)
    finally:
        if owned:
            src.close()


open.__doc__ = (open.__doc__ or "") + "\n" + (_sluice.open.__doc__ or "")
split.__doc__ = _sluice.split.__doc__
