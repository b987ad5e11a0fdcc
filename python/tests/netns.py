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
            # A group of its own: killing it kills what it started too
            # (nginx's workers).
            start_new_session=True,
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
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def _close(bgs: List[Bg], namespaces: Sequence[str], scratch: Path) -> None:
    """Kill what a network started (and anything else still running in
    its namespaces), then remove the namespaces and the scratch directory:
    a test leaves no process or namespace behind, whatever it did."""
    for bg in bgs:
        try:
            bg.kill()
        except OSError:
            pass
    for ns in namespaces:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    shutil.rmtree(scratch, ignore_errors=True)


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
        _close(self._bg, (self.a, self.b), self.dir)


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


class Lan:
    """Namespaces on one private LAN (10.232.0.0/24): a bridge in a hub
    namespace, and a veth from it into each member namespace (`eth0`,
    10.232.0.N); each stands for a machine. Members and their addresses
    are given in order, from .1."""

    def __init__(self, test: str, members: Sequence[str]) -> None:
        tag = f"slpy{os.getpid()}-{next(_NEXT)}"
        self.hub = f"{tag}hub"
        self.ns = {m: f"{tag}{m}" for m in members}
        self.addr = {m: f"10.232.0.{i + 1}" for i, m in enumerate(members)}
        self.dir = Path(tempfile.mkdtemp(prefix=f"sluice-py-{test}-"))
        self._bg: List[Bg] = []
        try:
            ip("netns", "add", self.hub)
            ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            ip("-n", self.hub, "link", "set", "br0", "up")
            for i, m in enumerate(members):
                ns = self.ns[m]
                ip("netns", "add", ns)
                ip("-n", self.hub, "link", "add", f"h{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
                ip("-n", self.hub, "link", "set", f"h{i}", "master", "br0", "up")
                ip("-n", ns, "addr", "add", f"{self.addr[m]}/24", "dev", "eth0")
                ip("-n", ns, "link", "set", "eth0", "up")
                ip("-n", ns, "link", "set", "lo", "up")
            for m in members:
                _wait_up(self.ns[m], "eth0")
        except (RuntimeError, subprocess.CalledProcessError, OSError) as e:
            self.close()
            if REQUIRED:
                pytest.fail(f"{test}: cannot make a test network: {e}")
            pytest.skip(f"{test}: live tests need root to make network namespaces ({e})")

    def home(self, member: str) -> Path:
        """A working directory of the member's own."""
        d = self.dir / member
        d.mkdir(exist_ok=True)
        return d

    def start(self, member: str, *args: str, env: Optional[Dict[str, str]] = None) -> Bg:
        """A program run in the member's namespace and directory."""
        bg = Bg(["ip", "netns", "exec", self.ns[member], *args], cwd=self.home(member), env=env)
        self._bg.append(bg)
        return bg

    def run(self, member: str, *args: str, timeout: float = 300,
            env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
        return subprocess.run(["ip", "netns", "exec", self.ns[member], *args], capture_output=True,
                              timeout=timeout, cwd=self.home(member), env=env)

    def close(self) -> None:
        _close(self._bg, [*self.ns.values(), self.hub], self.dir)


def nginx(lan: Lan, member: str, root: Path, port: int = 8080) -> Bg:
    """Debian's nginx serving `root` (read-only, range requests) on the
    member's address, in the foreground, its files in its own home."""
    home = lan.home(member)
    for d in ("temp", "logs"):
        (home / d).mkdir(exist_ok=True)
    conf = home / "nginx.conf"
    conf.write_text(f"""
user root;
daemon off;
worker_processes 1;
pid {home}/nginx.pid;
error_log stderr notice;
events {{ worker_connections 256; }}
http {{
    access_log {home}/logs/access.log;
    client_body_temp_path {home}/temp/body;
    proxy_temp_path {home}/temp/proxy;
    fastcgi_temp_path {home}/temp/fastcgi;
    uwsgi_temp_path {home}/temp/uwsgi;
    scgi_temp_path {home}/temp/scgi;
    types {{ application/octet-stream pcap; }}
    server {{
        listen {lan.addr[member]}:{port};
        root {root};
        location / {{ autoindex off; }}
    }}
}}
""")
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    bg = lan.start(member, exe, "-p", str(home), "-c", str(conf), "-e", "stderr")
    start = time.monotonic()
    while True:
        done = lan.run(member, "bash", "-c",
                       f"exec 3<>/dev/tcp/{lan.addr[member]}/{port}", timeout=5)
        if done.returncode == 0:
            return bg
        if bg.proc.poll() is not None:
            raise AssertionError(f"nginx exited ({bg.proc.returncode}): {bg.stderr()}")
        if time.monotonic() - start > 20:
            raise AssertionError(f"nginx not listening after 20 s: {bg.stderr()}")
        time.sleep(0.1)
