"""How ``sluice.dask`` runs tasks: on a Dask client, or on local threads
when there is none, and how it makes sure a run ends.

The rule: a run never waits without a bound. Before anything is sent,
every worker is asked (with a probe that needs nothing of sluice to reach
it) whether it imports the same sluice; while tasks run, a cluster left
without workers for ``worker_timeout`` seconds ends the run with an error,
and a task's error reaches the caller at once, naming the worker and the
input it was reading; the run's other tasks are then cancelled.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import time
import warnings
from concurrent.futures import CancelledError
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional

WORKER_TIMEOUT = 60.0
"""Seconds a run waits with no worker in the cluster before it fails."""

# What a worker evaluates to say which sluice it has: built from builtins
# only, so that a worker without sluice can still run the probe (and say
# so) instead of failing to unpickle the task.
_PROBE = "__import__('sluice._sluice').__version__"


def _identity(value: Any) -> Any:
    return value


class WorkerError(RuntimeError):
    """A Dask worker that cannot run sluice's tasks (no sluice, another
    version), or a cluster left without workers."""


def where() -> str:
    """The worker this runs on, as Dask names it, or this process."""
    try:
        from distributed import get_worker

        return f"worker {get_worker().address}"
    except (ImportError, ValueError):
        return f"process {os.getpid()}"


def _picklable_causes(e: BaseException, depth: int = 0) -> None:
    """Causes that cannot travel to the client (an HTTP library's error
    holding its response headers) replaced by their type and text, so that
    the error itself travels with its type (Dask sends a bare Exception of
    its repr when any link of the chain does not pickle)."""
    for attr in ("__cause__", "__context__"):
        c = getattr(e, attr)
        if c is None or depth > 8:
            continue
        try:
            pickle.loads(pickle.dumps(c))
        except Exception:
            c = RuntimeError(f"{type(c).__name__}: {c}")
            setattr(e, attr, c)
        _picklable_causes(c, depth + 1)


def located(e: BaseException, what: str) -> BaseException:
    """`e` with `what` (a worker and an input) in its message, same type and
    attributes, so the caller still catches what it expects."""
    _picklable_causes(e)
    if isinstance(e, OSError) and e.strerror and len(e.args) >= 2:
        # Both: str() reads the attribute, pickling (to the client) the args.
        e.strerror = f"{e.strerror} ({what})"
        e.args = (e.args[0], e.strerror) + tuple(e.args[2:])
        return e
    if e.args and isinstance(e.args[0], str):
        e.args = (f"{e.args[0]} ({what})",) + tuple(e.args[1:])
    elif not e.args:
        e.args = (what,)
    return e


def check_workers(client: Any) -> None:
    """Raise `WorkerError` unless every worker imports this sluice."""
    from . import __version__

    answers: Dict[str, Any] = client.run(eval, _PROBE, on_error="return")
    bad = []
    for addr, got in sorted(answers.items()):
        if isinstance(got, BaseException):
            bad.append(f"{addr}: cannot import sluice ({type(got).__name__}: {got})")
        elif got != __version__:
            bad.append(f"{addr}: sluice {got}, not {__version__} as here")
    if bad:
        raise WorkerError(
            "workers that cannot run sluice's tasks (install the same sluice on every worker):\n  "
            + "\n  ".join(bad)
        )


class Runner:
    """Tasks on a Dask client, or (with no client) on local threads: the
    native code releases the GIL, so threads run ranges in parallel."""

    def __init__(self, client: Any, worker_timeout: float = WORKER_TIMEOUT) -> None:
        if client is None:
            try:
                from distributed import get_client

                client = get_client()
            except (ImportError, ValueError):
                client = None
        self.client = client
        self.worker_timeout = worker_timeout
        self.pool = ThreadPoolExecutor(os.cpu_count() or 1) if client is None else None
        self.submitted: List[Any] = []
        if client is not None:
            check_workers(client)

    def submit(self, key: str, fn: Any, *args: Any, **kw: Any) -> Any:
        if self.client is not None:
            f = self.client.submit(fn, *args, key=key, pure=False, **kw)
        else:
            assert self.pool is not None
            f = self.pool.submit(fn, *args)
        self.submitted.append(f)
        return f

    def share(self, key: str, value: Any) -> Any:
        """One object every task uses, fetched by each worker once: the
        result of a task (not scattered data, which is gone with the
        workers holding it, cancelling every task that needs it), so the
        scheduler can make it again on another worker."""
        if self.client is not None:
            # Dask warns about a large object in the graph and suggests
            # scattering it: here it is deliberate (once per run, and it
            # survives the loss of any worker, which scattered data does
            # not).
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
                return self.client.submit(_identity, value, key=key, pure=False)
        return value

    def wait(self, futures: List[Any], progress: bool = False) -> List[Any]:
        """The futures' results: the first error as soon as it happens, a
        `WorkerError` when the cluster has had no worker for
        `worker_timeout` seconds."""
        if self.client is None:
            return [f.result() for f in futures]
        from distributed import wait

        if progress:
            from distributed import progress as show

            show(futures)
        alone_since: Optional[float] = None
        while True:
            try:
                wait(futures, timeout=1.0)
            except (TimeoutError, asyncio.TimeoutError):
                pass
            if any(f.status in ("error", "cancelled") for f in futures) or all(f.done() for f in futures):
                try:
                    return self.client.gather(futures)
                except CancelledError as e:
                    raise WorkerError(
                        f"the scheduler cancelled the run's tasks ({e}): workers were lost with data "
                        "the tasks needed"
                    ) from e
            if self.client.nthreads():
                alone_since = None
                continue
            now = time.monotonic()
            alone_since = alone_since or now
            if now - alone_since >= self.worker_timeout:
                raise WorkerError(
                    f"the Dask cluster has had no worker for {self.worker_timeout:.0f} s: "
                    "every worker was lost (see their logs); the run is abandoned"
                )

    def close(self, failed: bool = False) -> None:
        if failed and self.client is not None and self.submitted:
            self.client.cancel(self.submitted)
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=failed)
