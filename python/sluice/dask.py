"""sluice's split on a Dask cluster: one task per file, large files cut
into byte ranges of about 256 MiB so that one file keeps many workers busy.

>>> from distributed import Client, LocalCluster
>>> import sluice.dask
>>> with Client(LocalCluster(n_workers=2, threads_per_worker=1)) as client:
...     counts = sluice.dask.split_counts(["day1.pcap", "day2.pcapng"],
...                                       {"web": "tcp port 80", "dns": "udp port 53"})
...     result = sluice.dask.split(["day1.pcap"], {"web": "tcp port 80"}, "out/")

The same code runs on any Dask cluster (SLURM, Kubernetes, YARN through
their cluster managers) whose workers see the files at the same paths.

How a range is read: each range task reads the records that start inside its
bytes, finding the first one by a chain of plausible record headers. The
ranges of a file are then checked against each other (``verify_ranges``):
each must have started exactly where the one before it stopped, and one that
did not is run again from the exact place, so no packet is lost or counted
twice whatever the guess. Every worker compiles a filter set once and keeps
it for the tasks that follow.

``split`` writes each filter's packets as shards,
``out_dir/NAME.FFFFF.RRRRR.pcap`` (file ``FFFFF``, range ``RRRRR``; only
shards that got packets exist; ``.pcapng`` for pcapng input), and last
``out_dir/manifest.json``, which lists every filter's shards in packet order
with the counts: a run without a manifest did not finish.

Progress: tasks are named ``sluice-split-...`` on the dashboard; with
``progress=True`` Dask's own progress bar is shown while the run waits.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _sluice

RANGE_BYTES = 256 << 20
"""How large a range of a file one task reads (bytes), by default."""

MANIFEST = "manifest.json"

PathLike = Union[str, "os.PathLike[str]"]
Filters = Union[Mapping[str, str], Sequence[Tuple[str, str]]]


# ----- on the workers -----

_SETS: Dict[Tuple[str, bool], "_sluice.FilterSet"] = {}
_SETS_LOCK = threading.Lock()


def _filter_set(digest: str, pairs: List[Tuple[str, str]], first_match: bool) -> "_sluice.FilterSet":
    """The compiled filter set, kept per worker process (compiling 100,000
    filters takes seconds; every task after the first reuses it)."""
    key = (digest, first_match)
    with _SETS_LOCK:
        s = _SETS.get(key)
        if s is None:
            s = _sluice.FilterSet(pairs, first_match=first_match)
            _SETS[key] = s
        return s


def _file_size(path: str) -> int:
    return os.stat(path).st_size


def _run_range(
    path: str,
    digest: str,
    pairs: List[Tuple[str, str]],
    first_match: bool,
    start: int,
    end: int,
    resume: Optional[bytes],
    out_dir: Optional[str],
    suffix: str,
    remove: Sequence[str],
) -> Dict[str, Any]:
    """One range on a worker; `remove`: files of an earlier, wrong run of
    the same range, deleted before this one writes."""
    for f in remove:
        try:
            os.remove(f)
        except FileNotFoundError:
            pass
    s = _filter_set(digest, pairs, first_match)
    return _sluice.split_range(path, s, start, end, resume, out_dir, suffix)


def _write_manifest(out_dir: str, manifest: Dict[str, Any]) -> str:
    path = os.path.join(out_dir, MANIFEST)
    temp = os.path.join(out_dir, f".{MANIFEST}.{os.getpid()}.tmp")
    with open(temp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    os.replace(temp, path)
    return path


# ----- on the client -----


def _digest(pairs: List[Tuple[str, str]], first_match: bool) -> str:
    """The key a worker keeps a compiled filter set under."""
    return hashlib.sha256(json.dumps([pairs, first_match]).encode()).hexdigest()


def _pairs(filters: Filters) -> List[Tuple[str, str]]:
    if isinstance(filters, _sluice.FilterSet):
        return list(filters.to_dict().items())
    if isinstance(filters, Mapping):
        return [(str(k), str(v)) for k, v in filters.items()]
    return [(str(k), str(v)) for k, v in filters]


def _paths(paths: Union[PathLike, Iterable[PathLike]]) -> List[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def _cuts(size: int, range_bytes: int) -> List[Tuple[int, int]]:
    """[0, size) in about equal ranges of at most `range_bytes`."""
    n = max(1, -(-size // max(1, range_bytes)))
    bounds = [size * i // n for i in range(n + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(n)]


class _Runner:
    """Tasks on a Dask client, or (with no client) on local threads: the
    native code releases the GIL, so threads run ranges in parallel."""

    def __init__(self, client: Any) -> None:
        if client is None:
            try:
                from distributed import get_client

                client = get_client()
            except (ImportError, ValueError):
                client = None
        self.client = client
        self.pool = ThreadPoolExecutor(os.cpu_count() or 1) if client is None else None

    def submit(self, key: str, fn: Any, *args: Any) -> Any:
        if self.client is not None:
            return self.client.submit(fn, *args, key=key, pure=False)
        assert self.pool is not None
        return self.pool.submit(fn, *args)

    def scatter(self, value: Any) -> Any:
        """One object sent to every worker once (a list given alone would
        be scattered element by element: a future per filter)."""
        if self.client is not None:
            return self.client.scatter([value], broadcast=True, hash=False)[0]
        return value

    def wait(self, futures: List[Any], progress: bool) -> List[Any]:
        if self.client is not None:
            if progress:
                from distributed import progress as show

                show(futures)
            return self.client.gather(futures)
        return [f.result() for f in futures]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def _task_key(kind: str, path: str, fi: int, ri: int, attempt: int, run: str) -> str:
    """A task's name on the dashboard; `run` makes it unique to one call
    (two splits of the same file at once must not share results)."""
    base = Path(path).name.replace(" ", "_")
    return f"sluice-{kind}-{base}-{fi}.{ri}.{attempt}-{run}"


def _run(
    paths: Union[PathLike, Iterable[PathLike]],
    filters: Filters,
    out_dir: Optional[PathLike],
    client: Any,
    first_match: bool,
    range_bytes: int,
    progress: bool,
) -> Dict[str, Any]:
    files = _paths(paths)
    pairs = _pairs(filters)
    # Names are checked here, before any task runs; filters compile on the
    # workers (a bad one raises sluice.FilterError from its first task).
    names = _sluice.FilterSet(pairs, first_match=first_match).names
    digest = _digest(pairs, first_match)
    out = None if out_dir is None else os.path.abspath(os.fspath(out_dir))
    runner = _Runner(client)
    run = uuid.uuid4().hex[:12]
    try:
        shared = runner.scatter(pairs)
        sizes = runner.wait(
            [runner.submit(_task_key("size", p, fi, 0, 0, run), _file_size, p) for fi, p in enumerate(files)],
            False,
        )
        plan = [_cuts(size, range_bytes) for size in sizes]

        def submit(fi: int, ri: int, resume: Optional[bytes], remove: Sequence[str], attempt: int) -> Any:
            start, end = plan[fi][ri]
            suffix = f".{fi:05d}.{ri:05d}"
            key = _task_key("split", files[fi], fi, ri, attempt, run)
            return runner.submit(
                key, _run_range, files[fi], digest, shared, first_match, start, end, resume, out, suffix, remove
            )

        futures = [[submit(fi, ri, None, (), 0) for ri in range(len(plan[fi]))] for fi in range(len(files))]
        flat = [f for per_file in futures for f in per_file]
        done = runner.wait(flat, progress)
        results: List[List[Dict[str, Any]]] = []
        at = 0
        for per_file in futures:
            results.append(done[at : at + len(per_file)])
            at += len(per_file)
        # Prove every file's cuts exact; run again what guessed wrong.
        for fi, per_file in enumerate(results):
            attempt = 0
            while True:
                verdict = _sluice.verify_ranges([r["ends"] for r in per_file])
                if verdict is None:
                    break
                if verdict[0] == "failed":
                    raise per_file[verdict[1]]["error"]
                _, ri, resume = verdict
                attempt += 1
                if attempt > 2 * len(per_file) + 2:
                    raise RuntimeError(f"{files[fi]}: the ranges do not agree after {attempt} runs")
                wrong = [f for f in per_file[ri]["files"] if f]
                per_file[ri] = runner.wait([submit(fi, ri, resume, wrong, attempt)], False)[0]
        counts = {n: 0 for n in names}
        shards: Dict[str, List[str]] = {n: [] for n in names}
        packets = 0
        for per_file in results:
            for r in per_file:
                packets += r["packets"]
                for n, c, f in zip(names, r["counts"], r["files"]):
                    counts[n] += c
                    if f:
                        shards[n].append(os.path.relpath(f, out) if out else f)
        manifest = {
            "format": "sluice-split-manifest",
            "version": 1,
            "first_match": first_match,
            "packets": packets,
            "inputs": [
                {"path": p, "size": s, "ranges": [list(c) for c in plan[i]]}
                for i, (p, s) in enumerate(zip(files, sizes))
            ],
            "filters": [
                {"name": n, "filter": t, "packets": counts[n], "shards": shards[n]} for n, t in pairs
            ],
        }
        if out is not None:
            where = runner.wait([runner.submit(_task_key("manifest", out, 0, 0, 0, run), _write_manifest, out, manifest)], False)
            manifest["manifest"] = where[0]
        manifest["counts"] = counts
        return manifest
    finally:
        runner.close()


def prepare(filters: Filters, client: Any = None, *, first_match: bool = False) -> None:
    """Compile the filter set on every worker now (each keeps it for the
    splits that follow), so that the first split's tasks do not all wait
    for it; a bad filter raises ``sluice.FilterError`` here. Compiling
    100,000 filters takes seconds per worker.

    ``client``: as for ``split_counts``; with no client the set is compiled
    in this process, where the local threads find it.
    """
    pairs = _pairs(filters)
    digest = _digest(pairs, first_match)

    def compile_here() -> None:
        _filter_set(digest, pairs, first_match).compile()

    runner = _Runner(client)
    try:
        c = runner.client
        if c is None:
            compile_here()
            return
        # A task pinned to each worker (not client.run, which would hold the
        # worker's event loop, and its heartbeats, for the whole compile).
        try:
            workers = c.scheduler_info(n_workers=-1)["workers"]
        except TypeError:  # distributed before 2025 lists every worker
            workers = c.scheduler_info()["workers"]
        futures = [
            c.submit(compile_here, key=f"sluice-prepare-{digest[:12]}-{i}", workers=[addr],
                     allow_other_workers=False, pure=False)
            for i, addr in enumerate(workers)
        ]
        c.gather(futures)
    finally:
        runner.close()


def split_counts(
    paths: Union[PathLike, Iterable[PathLike]],
    filters: Filters,
    client: Any = None,
    *,
    first_match: bool = False,
    range_bytes: int = RANGE_BYTES,
    progress: bool = False,
) -> Dict[str, int]:
    """Each filter's packet count over every file, as one ``sluice split
    --count`` run per file would give them, summed: a dict in filter order.

    ``client``: a ``distributed.Client`` (default: the current one, or
    local threads when there is none). ``filters``: a dict of name to filter
    text, or (name, text) pairs. A bad filter raises ``sluice.FilterError``
    before any task runs; a corrupt capture raises ``sluice.CaptureError``.
    """
    return _run(paths, filters, None, client, first_match, range_bytes, progress)["counts"]


def split(
    paths: Union[PathLike, Iterable[PathLike]],
    filters: Filters,
    out_dir: PathLike,
    client: Any = None,
    *,
    first_match: bool = False,
    range_bytes: int = RANGE_BYTES,
    progress: bool = False,
) -> Dict[str, Any]:
    """Split every file by the filters on the cluster's workers, writing
    each filter's packets as shards in ``out_dir`` (which the workers must
    see) and ``out_dir/manifest.json`` last; returns the manifest as a dict
    (``filters``: name, filter, packets and shards in packet order per
    filter; ``counts``: name to packets; ``manifest``: its path).
    """
    return _run(paths, filters, out_dir, client, first_match, range_bytes, progress)


def shards(out_dir: PathLike, name: str) -> List[str]:
    """The shard files of filter ``name`` in packet order, read from
    ``out_dir/manifest.json``.

    >>> for path in sluice.dask.shards("out/", "web"):
    ...     for ts, frame in sluice.open(path):
    ...         ...
    """
    base = os.fspath(out_dir)
    with open(os.path.join(base, MANIFEST), encoding="utf-8") as f:
        manifest = json.load(f)
    for entry in manifest["filters"]:
        if entry["name"] == name:
            return [os.path.join(base, s) for s in entry["shards"]]
    raise KeyError(name)
