"""sluice's split on a Dask cluster: one task per file, large files cut
into byte ranges of about 256 MiB so that one file keeps many workers busy.

>>> from distributed import Client, LocalCluster
>>> import sluice.dask
>>> with Client(LocalCluster(n_workers=2, threads_per_worker=1)) as client:
...     counts = sluice.dask.split_counts(["day1.pcap", "https://archive/day2.pcapng.gz"],
...                                       {"web": "tcp port 80", "dns": "udp port 53"})
...     result = sluice.dask.split(["day1.pcap"], {"web": "tcp port 80"}, "out/", format="parquet")

Inputs are paths or URLs: a relative path is made absolute on the client
(the workers must see it at that path), ``file://`` URLs are paths, and
``http(s)://``, ``s3://`` (with s3fs) and every other fsspec protocol are
read by the workers themselves, the ranges with range requests: archives on
a web server or object storage need no shared disk. gzip and zstd captures
are read whole by one task (they have no byte ranges).

How a range is read: each range task reads the records that start inside its
bytes, finding the first one by a chain of plausible record headers. The
ranges of a file are then checked against each other (``verify_ranges``):
each must have started exactly where the one before it stopped, and one that
did not is run again from the exact place, so no packet is lost or counted
twice whatever the guess. The filter set is compiled once, on the client,
and shipped to the workers in sluice's versioned format
(``FilterSet.export``); each worker loads it once and keeps it for the tasks
that follow (``prepare`` does it up front).

Failures end a run, never hang it: before any task, every worker is asked
whether it imports the same sluice (``WorkerError`` naming the workers that
do not); a task's error reaches the caller at once, its message naming the
worker and the input; a cluster left with no worker for ``worker_timeout``
seconds (60 by default) ends the run with a ``WorkerError``. A worker lost
while others remain: Dask runs its tasks again elsewhere (counts stay
exact), and after three losses of one task raises ``KilledWorker``.

``split`` writes each filter's packets as shards,
``out_dir/NAME.FFFFF.RRRRR.pcap`` (file ``FFFFF``, range ``RRRRR``; only
shards that got packets exist; ``.pcapng`` for pcapng input); with
``format="parquet"`` also each filter's packets as a Parquet dataset beside
them, ``out_dir/NAME.parquet/part-FFFFF-RRRRR.parquet`` (columns
``timestamp``, ``wirelen``, ``linktype``, ``frame``: ``sluice.to_arrow`` of
a batch). Last comes ``out_dir/manifest.json``, which lists every filter's
shards in packet order with the counts: a run without a manifest did not
finish.

Progress: tasks are named ``sluice-split-...`` on the dashboard; with
``progress=True`` Dask's own progress bar is shown while the run waits.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _inputs, _sluice
from ._cluster import WORKER_TIMEOUT, Runner, WorkerError, located, where

__all__ = ["RANGE_BYTES", "WorkerError", "prepare", "shards", "split", "split_counts"]

RANGE_BYTES = 256 << 20
"""How large a range of a file one task reads (bytes), by default."""

MANIFEST = "manifest.json"

PathLike = Union[str, "os.PathLike[str]"]
Filters = Union[Mapping[str, str], Sequence[Tuple[str, str]]]
Options = Dict[str, Any]


# ----- on the workers -----

_SETS: Dict[Tuple[str, str], "_sluice.FilterSet"] = {}
_SETS_LOCK = threading.Lock()


def _options_key(options: Options) -> str:
    return json.dumps(options, sort_keys=True)


def _filter_set(
    digest: str, pairs: List[Tuple[str, str]], options: Options, shipped: Optional[bytes] = None
) -> "_sluice.FilterSet":
    """The filter set, kept per worker process: loaded from the set the
    client compiled and shipped (``FilterSet.export``: no compiling here),
    or compiled at its first use for a link type that was not shipped;
    every task after the first reuses it."""
    key = (digest, _options_key(options))
    with _SETS_LOCK:
        s = _SETS.get(key)
        if s is None:
            s = _sluice.FilterSet(pairs, **options)
            if shipped is not None:
                s.load(shipped)
            _SETS[key] = s
        return s


# On the client: sets compiled and exported once, by digest.
_SHIPPED: Dict[str, bytes] = {}


def _shipped(digest: str, pairs: List[Tuple[str, str]], options: Options) -> Optional[bytes]:
    """The set compiled here for Ethernet, in the shipped format (MPF sets
    are not merged: nothing to ship)."""
    if "mpf" in options:
        return None
    with _SETS_LOCK:
        blob = _SHIPPED.get(digest)
        if blob is None:
            blob = _sluice.FilterSet(pairs, **options).export()
            _SHIPPED.clear()
            _SHIPPED[digest] = blob
        return blob


def _describe(source: str) -> Tuple[int, Optional[str]]:
    """On a worker: an input's size, and its compression (read whole)."""
    try:
        return _inputs.size(source), _inputs.compressed(source)
    except Exception as e:
        raise located(e, f"{where()}, input {source}")


def _parquet(shard: str, dest: str) -> str:
    """A shard's packets as one Parquet file (`sluice.to_arrow` of its
    batches), put in place when complete."""
    import pyarrow.parquet as pq

    from ._tables import to_arrow

    os.makedirs(os.path.dirname(dest), exist_ok=True)
    temp = f"{dest}.{os.getpid()}.tmp"
    writer = None
    try:
        with _sluice.open(shard) as r:
            while True:
                b = r.read_batch(65536)
                if len(b) == 0:
                    break
                t = to_arrow(b)
                if writer is None:
                    writer = pq.ParquetWriter(temp, t.schema)
                writer.write_table(t)
    finally:
        if writer is not None:
            writer.close()
    os.replace(temp, dest)
    return dest


def _parquet_name(out_dir: str, name: str, suffix: str) -> str:
    fi, ri = suffix.strip(".").split(".")
    return os.path.join(out_dir, f"{name}.parquet", f"part-{fi}-{ri}.parquet")


def _run_range(
    source: str,
    digest: str,
    pairs: List[Tuple[str, str]],
    options: Options,
    start: int,
    end: int,
    resume: Optional[bytes],
    out_dir: Optional[str],
    suffix: str,
    remove: Sequence[str],
    parquet: bool,
    shipped: Optional[bytes] = None,
) -> Dict[str, Any]:
    """One range on a worker; `remove`: files of an earlier, wrong run of
    the same range, deleted before this one writes. Errors name the
    worker and the input."""
    here = f"{where()}, input {source}"
    try:
        for f in remove:
            try:
                os.remove(f)
            except FileNotFoundError:
                pass
        s = _filter_set(digest, pairs, options, shipped)
        src, url, owned = _inputs.opened(source)
        try:
            r = _sluice.split_range(src, s, start, end, resume, out_dir, suffix, name=url)
        finally:
            if owned:
                src.close()
        if r["error"] is not None:
            r["error"] = located(r["error"], here)
        r["parquet"] = []
        if parquet and out_dir is not None:
            for (name, _), f in zip(pairs, r["files"]):
                r["parquet"].append(_parquet(f, _parquet_name(out_dir, name, suffix)) if f else None)
        return r
    except Exception as e:
        raise located(e, here)


def _write_manifest(out_dir: str, manifest: Dict[str, Any], parquet: bool) -> str:
    if parquet:
        # A filter without packets gets an empty dataset (its schema).
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pa.schema([
            ("timestamp", pa.timestamp("ns", tz="UTC")), ("wirelen", pa.int64()),
            ("linktype", pa.uint16()), ("frame", pa.large_binary()),
        ])
        for entry in manifest["filters"]:
            if not entry["parquet"]:
                d = os.path.join(out_dir, f"{entry['name']}.parquet")
                os.makedirs(d, exist_ok=True)
                pq.write_table(schema.empty_table(), os.path.join(d, "part-empty.parquet"))
    path = os.path.join(out_dir, MANIFEST)
    temp = os.path.join(out_dir, f".{MANIFEST}.{os.getpid()}.tmp")
    with open(temp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    os.replace(temp, path)
    return path


# ----- on the client -----


def _digest(pairs: List[Tuple[str, str]], options: Options) -> str:
    """The key a worker keeps a compiled filter set under."""
    return hashlib.sha256(json.dumps([pairs, _options_key(options)]).encode()).hexdigest()


def _pairs(filters: Filters) -> List[Tuple[str, str]]:
    if isinstance(filters, _sluice.FilterSet):
        return list(filters.to_dict().items())
    if isinstance(filters, Mapping):
        return [(str(k), str(v)) for k, v in filters.items()]
    return [(str(k), str(v)) for k, v in filters]


def _options(first_match: bool, fragments: Any, mpf: Any) -> Options:
    o: Options = {"first_match": bool(first_match)}
    if fragments:
        o["fragments"] = fragments
    if mpf:
        o["mpf"] = mpf
    return o


def _sources(paths: Union[PathLike, Iterable[PathLike]]) -> List[str]:
    """Paths made absolute here, URLs as they are."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return [str(_inputs.absolute(p)) for p in paths]


def _cuts(size: int, range_bytes: int) -> List[Tuple[int, int]]:
    """[0, size) in about equal ranges of at most `range_bytes`."""
    n = max(1, -(-size // max(1, range_bytes)))
    bounds = [size * i // n for i in range(n + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(n)]


def _task_key(kind: str, path: str, fi: int, ri: int, attempt: int, run: str) -> str:
    """A task's name on the dashboard; `run` makes it unique to one call
    (two splits of the same file at once must not share results)."""
    base = Path(path.split("?")[0]).name.replace(" ", "_")
    return f"sluice-{kind}-{base}-{fi}.{ri}.{attempt}-{run}"


def _run(
    paths: Union[PathLike, Iterable[PathLike]],
    filters: Filters,
    out_dir: Optional[PathLike],
    client: Any,
    options: Options,
    range_bytes: int,
    progress: bool,
    parquet: bool = False,
    worker_timeout: float = WORKER_TIMEOUT,
    ship: bool = True,
) -> Dict[str, Any]:
    files = _sources(paths)
    pairs = _pairs(filters)
    # Names, options and MPF programs are checked here, before any task
    # runs; filters compile on the workers (a bad one raises
    # sluice.FilterError from its first task).
    names = _sluice.FilterSet(pairs, **options).names
    digest = _digest(pairs, options)
    out = None if out_dir is None else os.path.abspath(os.fspath(out_dir))
    if parquet:
        import pyarrow.parquet  # noqa: F401  (needed on the workers too)
    runner = Runner(client, worker_timeout)
    run = uuid.uuid4().hex[:12]
    failed = True
    try:
        shared = runner.share(f"sluice-filters-{digest[:16]}-{run}", pairs)
        # Built once here, loaded by every worker (not compiled again).
        blob = _shipped(digest, pairs, options) if ship and runner.client is not None else None
        shipped = None if blob is None else runner.share(f"sluice-shipped-{digest[:16]}-{run}", blob)
        described = runner.wait(
            [runner.submit(_task_key("size", p, fi, 0, 0, run), _describe, p) for fi, p in enumerate(files)]
        )
        sizes = [d[0] for d in described]
        # Compressed inputs have no byte ranges; fragment dispatch and MPF
        # keep state from packet to packet: their files are read whole.
        whole = "fragments" in options or "mpf" in options
        plan = [
            [(0, 2**64 - 1)] if (whole or d[1]) else _cuts(d[0], range_bytes) for d in described
        ]

        def submit(fi: int, ri: int, resume: Optional[bytes], remove: Sequence[str], attempt: int) -> Any:
            start, end = plan[fi][ri]
            suffix = f".{fi:05d}.{ri:05d}"
            key = _task_key("split", files[fi], fi, ri, attempt, run)
            return runner.submit(
                key, _run_range, files[fi], digest, shared, options, start, end, resume, out, suffix, remove,
                parquet, shipped,
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
                wrong = [f for f in per_file[ri]["files"] + per_file[ri]["parquet"] if f]
                per_file[ri] = runner.wait([submit(fi, ri, resume, wrong, attempt)])[0]
        counts = {n: 0 for n in names}
        shards: Dict[str, List[str]] = {n: [] for n in names}
        tables: Dict[str, List[str]] = {n: [] for n in names}
        packets = 0
        for per_file in results:
            for r in per_file:
                packets += r["packets"]
                for n, c, f, p in zip(names, r["counts"], r["files"], r["parquet"] or [None] * len(names)):
                    counts[n] += c
                    if f:
                        shards[n].append(os.path.relpath(f, out) if out else f)
                    if p:
                        tables[n].append(os.path.relpath(p, out) if out else p)
        manifest: Dict[str, Any] = {
            "format": "sluice-split-manifest",
            "version": 2,
            "options": options,
            "first_match": options["first_match"],
            "packets": packets,
            "inputs": [
                {"path": p, "size": s, "compressed": d[1], "ranges": [list(c) for c in plan[i]]}
                for i, (p, s, d) in enumerate(zip(files, sizes, described))
            ],
            "filters": [
                {"name": n, "filter": t, "packets": counts[n], "shards": shards[n], "parquet": tables[n]}
                for n, t in pairs
            ],
        }
        if out is not None:
            key = _task_key("manifest", out, 0, 0, 0, run)
            where_ = runner.wait([runner.submit(key, _write_manifest, out, manifest, parquet)])
            manifest["manifest"] = where_[0]
        manifest["counts"] = counts
        failed = False
        return manifest
    finally:
        runner.close(failed)


def prepare(
    filters: Filters,
    client: Any = None,
    *,
    first_match: bool = False,
    fragments: Any = None,
    mpf: Any = None,
    ship: bool = True,
) -> None:
    """Make the filter set ready on every worker now (each keeps it for
    the splits that follow), so that the first split's tasks do not all
    wait for it; a bad filter raises ``sluice.FilterError`` here. With
    ``ship`` (the default) the set is compiled once, here, and every
    worker loads it (``FilterSet.export``/``load``: 100,000 filters load
    in about 4 s against 8 to 15 s of compiling, and the workers' cores
    are not spent on it); otherwise each worker compiles it.

    ``client``: as for ``split_counts``; with no client the set is compiled
    in this process, where the local threads find it.
    """
    pairs = _pairs(filters)
    options = _options(first_match, fragments, mpf)
    digest = _digest(pairs, options)

    def compile_here(shipped: Optional[bytes] = None) -> None:
        s = _filter_set(digest, pairs, options, shipped)
        if shipped is None:
            s.compile()

    runner = Runner(client)
    try:
        c = runner.client
        if c is None:
            compile_here()
            return
        blob = _shipped(digest, pairs, options) if ship else None
        shipped = None if blob is None else runner.share(f"sluice-shipped-{digest[:16]}-{uuid.uuid4().hex[:12]}", blob)
        # A task pinned to each worker (not client.run, which would hold the
        # worker's event loop, and its heartbeats, for the whole compile).
        try:
            workers = c.scheduler_info(n_workers=-1)["workers"]
        except TypeError:  # distributed before 2025 lists every worker
            workers = c.scheduler_info()["workers"]
        futures = [
            runner.submit(f"sluice-prepare-{digest[:12]}-{i}-{uuid.uuid4().hex[:8]}", compile_here, shipped,
                          workers=[addr], allow_other_workers=False)
            for i, addr in enumerate(workers)
        ]
        runner.wait(futures)
    finally:
        runner.close()


def split_counts(
    paths: Union[PathLike, Iterable[PathLike]],
    filters: Filters,
    client: Any = None,
    *,
    first_match: bool = False,
    fragments: Any = None,
    mpf: Any = None,
    range_bytes: int = RANGE_BYTES,
    progress: bool = False,
    worker_timeout: float = WORKER_TIMEOUT,
    ship: bool = True,
) -> Dict[str, int]:
    """Each filter's packet count over every file, as one ``sluice split
    --count`` run per file would give them, summed: a dict in filter order.

    ``paths``: paths or URLs (see the module's doc). ``client``: a
    ``distributed.Client`` (default: the current one, or local threads
    when there is none). ``filters``: a dict of name to filter text, or
    (name, text) pairs. ``fragments``, ``mpf``: as ``sluice.split``'s
    (each file is then read whole by one task). A bad filter raises
    ``sluice.FilterError``; a corrupt capture ``sluice.CaptureError``; a
    worker without sluice, or a cluster without workers for
    ``worker_timeout`` seconds, ``WorkerError``. ``ship``: compile the set
    once here and have the workers load it (see ``prepare``).
    """
    options = _options(first_match, fragments, mpf)
    return _run(paths, filters, None, client, options, range_bytes, progress, False, worker_timeout, ship)["counts"]


def split(
    paths: Union[PathLike, Iterable[PathLike]],
    filters: Filters,
    out_dir: PathLike,
    client: Any = None,
    *,
    first_match: bool = False,
    fragments: Any = None,
    mpf: Any = None,
    format: str = "pcap",
    range_bytes: int = RANGE_BYTES,
    progress: bool = False,
    worker_timeout: float = WORKER_TIMEOUT,
    ship: bool = True,
) -> Dict[str, Any]:
    """Split every file by the filters on the cluster's workers, writing
    each filter's packets as shards in ``out_dir`` (which the workers must
    see) and ``out_dir/manifest.json`` last; ``format="parquet"`` writes a
    Parquet dataset per filter beside the shards (``NAME.parquet/``; needs
    pyarrow on the workers). Returns the manifest as a dict (``filters``:
    name, filter, packets, shards and parquet parts in packet order per
    filter; ``counts``: name to packets; ``manifest``: its path).
    """
    if format not in ("pcap", "parquet"):
        raise ValueError(f"format {format!r}: pcap or parquet")
    options = _options(first_match, fragments, mpf)
    return _run(paths, filters, out_dir, client, options, range_bytes, progress, format == "parquet",
                worker_timeout, ship)


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
