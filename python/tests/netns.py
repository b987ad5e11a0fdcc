"""A private network for the live tests, as the Rust live tests build one
(tests/live/net.rs): network namespaces joined by veth pairs with IPv6 off,
so nothing crosses them but what a test sends, and programs started inside
them in the background.

Making namespaces needs root. Without it the tests say so and skip, unless
``SLUICE_LIVE_REQUIRED`` is set (``scripts/test.sh`` sets it as root),
where a network that cannot be made fails the test."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest

REQUIRED = bool(os.environ.get("SLUICE_LIVE_REQUIRED"))
_NEXT = itertools.count()


def need_root(what: str) -> None:
    """Skip (or fail, when live tests are required) without root."""
    if os.geteuid() != 0:
        if REQUIRED:
            pytest.fail(f"{what} needs root (SLUICE_LIVE_REQUIRED is set)")
        pytest.skip(f"{what} needs root to make network namespaces")


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _sysctl_v6_off(ns: str, dev: str) -> None:
    for key in ("all", "default", dev):
        subprocess.run(
            ["ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1"],
            check=True,
            capture_output=True,
        )


def _wait_up(ns: str, dev: str) -> None:
    start = time.monotonic()
    while "state UP" not in subprocess.run(
        ["ip", "-n", ns, "link", "show", "dev", dev], capture_output=True, text=True
    ).stdout:
        if time.monotonic() - start > 10:
            raise RuntimeError(f"{dev} in {ns} not up after 10 s")
        time.sleep(0.02)


class Bg:
    """A program running in the background, its output collected."""

    def __init__(self, argv: Sequence[str], cwd: Optional[Path] = None, env: Optional[Dict[str, str]] = None) -> None:
        self.argv = list(argv)
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
        self.out = bytearray()
        self.err = bytearray()
        self._threads = [
            threading.Thread(target=self._collect, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._collect, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for t in self._threads:
            t.start()

    @staticmethod
    def _collect(stream, into: bytearray) -> None:  # type: ignore[no-untyped-def]
        for chunk in iter(lambda: stream.read1(8192), b""):
            into.extend(chunk)

    def stderr(self) -> str:
        return self.err.decode(errors="replace")

    def wait_for(self, what: str, timeout: float = 20.0) -> None:
        """Until standard error says `what` (a failure if it exits first)."""
        start = time.monotonic()
        while what not in self.stderr():
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.argv[:6]} exited ({self.proc.returncode}) first: {self.stderr()}")
            if time.monotonic() - start > timeout:
                raise AssertionError(f"{self.argv[:6]}: no {what!r} after {timeout} s: {self.stderr()}")
            time.sleep(0.02)

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def wait(self, timeout: float = 30.0) -> int:
        """Its exit status (killed, and a failure, after `timeout`)."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"{self.argv[:6]} still running after {timeout} s: {self.stderr()}")
        for t in self._threads:
            t.join(5)
        return rc

    def interrupt(self, timeout: float = 30.0) -> int:
        self.signal(signal.SIGINT)
        return self.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Net:
    """Namespaces `a` (interface `va`, 10.231.0.1) and `b` (`vb`,
    10.231.0.2) joined by a veth pair, and a scratch directory."""

    def __init__(self, test: str) -> None:
        tag = f"slpy{os.getpid()}-{next(_NEXT)}"
        self.a = f"{tag}a"
        self.b = f"{tag}b"
        self.dir = Path(tempfile.mkdtemp(prefix=f"sluice-py-{test}-"))
        self._bg: List[Bg] = []
        try:
            ip("netns", "add", self.a)
            ip("netns", "add", self.b)
            ip("link", "add", "va", "netns", self.a, "type", "veth", "peer", "name", "vb", "netns", self.b)
            for ns, dev, addr in ((self.a, "va", "10.231.0.1/24"), (self.b, "vb", "10.231.0.2/24")):
                _sysctl_v6_off(ns, dev)
                ip("-n", ns, "link", "set", dev, "mtu", "9000")
                ip("-n", ns, "addr", "add", addr, "dev", dev)
                ip("-n", ns, "link", "set", dev, "up")
            _wait_up(self.a, "va")
            _wait_up(self.b, "vb")
        except (RuntimeError, subprocess.CalledProcessError, OSError) as e:
            self.close()
            if REQUIRED:
                pytest.fail(f"{test}: cannot make a test network: {e}")
            pytest.skip(f"{test}: live tests need root to make network namespaces ({e})")

    def argv(self, ns: str, *args: str) -> List[str]:
        return ["ip", "netns", "exec", ns, *args]

    def start(self, ns: str, *args: str, **kw) -> Bg:  # type: ignore[no-untyped-def]
        bg = Bg(self.argv(ns, *args), **kw)
        self._bg.append(bg)
        return bg

    def run(self, ns: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
        return subprocess.run(self.argv(ns, *args), capture_output=True, timeout=timeout)

    def replay(self, sluice_bin: Path, capture: Path) -> int:
        """Send a capture's frames out of `va` as fast as the kernel takes
        them; the number sent."""
        done = self.run(self.a, str(sluice_bin), "replay", "-i", "va", "-r", str(capture), "--topspeed", "--json")
        assert done.returncode == 0, f"replay {capture}: {done.stderr.decode()}"
        return int(json.loads(done.stdout)["sent"])

    def tcpdump(self, out: Path) -> Bg:
        """tcpdump writing everything `vb` sees to `out`, listening."""
        bg = self.start(self.b, "tcpdump", "-Z", "root", "-i", "vb", "-w", str(out))
        bg.wait_for("listening on")
        return bg

    def file(self, name: str) -> Path:
        return self.dir / name

    def close(self) -> None:
        for bg in self._bg:
            bg.kill()
        for ns in (self.a, self.b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def settle() -> None:
    """Let the rings hand over their last blocks (a block waits up to its
    timeout, and tcpdump's up to 1 s, before it is handed over)."""
    time.sleep(1.3)


def libpcap_frames(capture: Path, expr: str, scratch: Path) -> List[bytes]:
    """The frames of `capture` that Debian's tcpdump (libpcap) keeps with
    `expr`."""
    args = ["tcpdump", "-r", str(capture), "-w", str(scratch)]
    if expr:
        args.append(expr)
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode == 0, f"tcpdump -r {capture} {expr!r}: {done.stderr}"
    import sluice

    with sluice.open(scratch) as r:
        return [frame for _, frame in r]
