#!/usr/bin/env python3
"""The sluice daemon's benchmark, on a veth pair between two namespaces.

* Endpoints (MPF's claim): N = 1, 100, 1,000 clients of a --first-match
  daemon, each claiming its own TCP session; 64-byte frames spread over
  the N sessions sent at top speed. Reported: the daemon's CPU per
  packet it received (user + system, all threads, start-up left out),
  and whether every frame went to exactly the right client.
* System calls: one busy client reading one flow, traced with
  `strace -c -f` while the traffic runs: system calls per 1,000 packets.
* Monitors (FFPF's Figure 12): N = 1, 2, 4, 8 tcpdumps writing files,
  each with its own filter, on Debian's libpcap (each its own capture)
  and on sluice's libpcap through the daemon (SLUICE_DAEMON): CPU per
  packet of the capturing processes (the daemon's included), of the
  kernel's softirq work (where it copies each packet to each packet
  socket; the sender's share is the same in both), and drops.

Usage: sudo scripts/bench-daemon.py [--frames N] [--sizes 1,100,1000]
                                    [--monitors 1,2,4,8] [--skip-monitors | --only-monitors]
Needs root, a release build (cargo build --release -p sluice -p
sluice-libpcap-abi; cargo build --release --examples -p sluice-daemon),
tcpdump, strace and iproute2.
Prints Markdown tables.
"""

import argparse
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("bench_live", os.path.join(HERE, "bench-live.py"))
live = importlib.util.module_from_spec(spec)
spec.loader.exec_module(live)

ROOT = live.ROOT
SLUICE = live.SLUICE
ENDPOINTS = os.path.join(ROOT, "target", "release", "examples", "endpoints")
LIBDIR = os.path.join(ROOT, "target", "release")
NS_A, NS_B = live.NS_A, live.NS_B


def bg(args, ns=NS_B, env=None):
    """A process in the capturing namespace, waited on until it says it
    is listening."""
    p = subprocess.Popen(
        ["ip", "netns", "exec", ns] + args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.set_blocking(p.stderr.fileno(), False)
    err = ""
    deadline = time.time() + 300
    while "listening on" not in err:
        chunk = p.stderr.read()
        if chunk:
            err += chunk.decode(errors="replace")
        if p.poll() is not None:
            raise SystemExit(f"{args[0]}: exited before listening: {err}")
        if time.time() > deadline:
            raise SystemExit(f"{args[0]}: not listening after 300 s: {err}")
        time.sleep(0.02)
    p.err_text = err
    return p


def finish(p, sig=signal.SIGINT):
    p.send_signal(sig)
    os.set_blocking(p.stderr.fileno(), True)
    out, err = p.communicate(timeout=300)
    return out.decode(errors="replace"), p.err_text + err.decode(errors="replace")


def daemon(sock, extra):
    return bg([SLUICE, "daemon", "-i", "vb", "--socket", sock] + extra)


def status(sock):
    o = live.sh(SLUICE, "daemon", "--status", "--json", "--socket", sock, check=False)
    if o.returncode != 0:
        raise SystemExit(f"sluice daemon --status: {o.stderr}")
    return json.loads(o.stdout)


def endpoints(tmp, sizes, frames):
    rows = []
    for n in sizes:
        sessions = [live.session(i) for i in range(n)]
        per = max(1, frames // n)
        order = [sessions[k % n] for k in range(per * n)]
        pcap = os.path.join(tmp, f"ep{n}.pcap")
        live.write_pcap(pcap, [live.frame(s, 64) for s in order])
        filters = os.path.join(tmp, f"ep{n}.txt")
        with open(filters, "w") as f:
            f.write("\n".join(live.expression(s) for s in sessions) + "\n")
        sock = os.path.join(tmp, f"ep{n}.sock")
        d = daemon(sock, ["--first-match", "--no-kernel-filter", "--pbuf-mib", "256"])
        c = bg([ENDPOINTS, sock, "vb", filters, "25"])
        cpu0 = live.settled_cpu(d.pid)
        sent = live.replay(pcap, 1)["sent"]
        time.sleep(1.5)
        cpu1 = live.proc_cpu(d.pid)
        wakeups = sum(i.get("wakeups", 0) for i in status(sock)["interfaces"])
        # The client reads until its time is up, then says what it got.
        os.set_blocking(c.stdout.fileno(), True)
        out, _ = c.communicate(timeout=120)
        flows = json.loads(out)["flows"]
        _, err = finish(d)
        m = re.search(r"(\d+) received by filter", err)
        received = int(m.group(1)) if m else 0
        got = sum(f[2] for f in flows)
        lost = sum(f[1] for f in flows)
        # Each flow accepted exactly its own session's frames (what it did
        # not read in time is counted as lost, not given to another).
        right = len(flows) == n and all(f[2] == per and f[0] + f[1] == f[2] for f in flows)
        rows.append((n, sent, received, got, lost, right, wakeups / max(1, received),
                     (cpu1 - cpu0) * 1e9 / max(1, received)))
    print("| endpoints | frames sent | received | claimed | lost (client behind) | each to its own client | readers woken per packet | daemon CPU ns/packet |")
    print("| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
    for n, sent, received, got, lost, right, wk, ns in rows:
        print(f"| {n:,} | {sent:,} | {received:,} | {got:,} | {lost:,} | {'yes' if right else 'NO'} | {wk:.3f} | {ns:,.0f} |")
    base = rows[0][7]
    for n, *_, ns in rows[1:]:
        print(f"\n{n:,} endpoints cost {ns / base:.2f}x one (the target: at most 2x)")
    print()


def syscalls(tmp, frames):
    s = live.session(0)
    pcap = os.path.join(tmp, "busy.pcap")
    live.write_pcap(pcap, [live.frame(s, 64) for _ in range(frames)])
    filters = os.path.join(tmp, "busy.txt")
    with open(filters, "w") as f:
        f.write(live.expression(s) + "\n")
    sock = os.path.join(tmp, "sc.sock")
    d = daemon(sock, ["--pbuf-mib", "256"])
    c = bg([ENDPOINTS, sock, "vb", filters, "3600"])
    # Trace the client from when it is busy until the traffic is over.
    tr = subprocess.Popen(
        ["strace", "-c", "-f", "-p", str(c.pid)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    time.sleep(0.5)
    sent = live.replay(pcap, 1)["sent"]
    time.sleep(1.0)
    tr.send_signal(signal.SIGINT)
    _, trace = tr.communicate(timeout=60)
    trace = trace.decode(errors="replace")
    st = status(sock)
    finish(c, signal.SIGKILL)
    finish(d)
    delivered = sum(f["accepted"] for cl in st["clients"] for f in cl["flows"])
    m = re.search(r"^-+.*\n\s*100\.00\s+\S+\s+\S+\s+(\d+)", trace, re.M)
    total = int(m.group(1)) if m else None
    if total is None:
        m = re.findall(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?total$", trace, re.M)
        total = int(m[-1]) if m else -1
    print("| busy client | frames sent | delivered | system calls | per 1,000 packets |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(f"| one flow | {sent:,} | {delivered:,} | {total:,} | {total * 1000 / max(1, delivered):.2f} |")
    print()


def softirq_cpu():
    """Seconds every core spent in softirq work, where the kernel hands
    each packet to each packet socket (not part of any process's time)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal
    return v[6] / os.sysconf("SC_CLK_TCK")


def monitors(tmp, counts, frames, narrow):
    """FFPF's Figure 12: N tcpdumps, each with a different filter: broad
    ones (most take most frames, and write them), or narrow ones (each
    one TCP session of the 64 in the traffic)."""
    sessions = [live.session(i) for i in range(64)]
    exprs = ["tcp", "tcp port 80", "ip", "not udp", "tcp and len > 60",
             "ip and tcp", "tcp port 443 or tcp port 80", "greater 40"]
    if narrow:
        exprs = [live.expression(s) for s in sessions[:8]]
    pcap = os.path.join(tmp, "mon.pcap")
    live.write_pcap(pcap, [live.frame(sessions[k % 64], 128) for k in range(frames)])
    # Debian's tcpdump asks for libpcap.so.0.8: a directory where that
    # name is sluice's library.
    libdir = os.path.join(tmp, "lib")
    os.makedirs(libdir, exist_ok=True)
    if not os.path.lexists(os.path.join(libdir, "libpcap.so.0.8")):
        os.symlink(os.path.join(LIBDIR, "libpcap.so"), os.path.join(libdir, "libpcap.so.0.8"))
    env_sl = dict(os.environ, LD_LIBRARY_PATH=libdir, SLUICE_DAEMON=os.path.join(tmp, "mon.sock"))
    rows = []
    for n in counts:
        for lib in ("libpcap", "sluice"):
            procs = []
            d = None
            if lib == "sluice":
                d = daemon(env_sl["SLUICE_DAEMON"], ["--pbuf-mib", "256"])
            for i in range(n):
                out = os.path.join(tmp, f"m{lib}{i}.pcap")
                args = ["tcpdump", "-Z", "root", "-i", "vb", "-w", out, exprs[i % len(exprs)]]
                procs.append(bg(args, env=env_sl if lib == "sluice" else None))
            pids = [p.pid for p in procs] + ([d.pid] if d else [])
            cpu0 = [live.settled_cpu(p) for p in pids]
            m0 = softirq_cpu()
            sent = live.replay(pcap, 1)["sent"]
            time.sleep(1.5)
            m1 = softirq_cpu()
            cpu1 = [live.proc_cpu(p) for p in pids]
            used = [b - a for a, b in zip(cpu0, cpu1)]
            daemon_ns = used[-1] * 1e9 / max(1, sent) if d else 0.0
            drops = 0
            for p in procs:
                _, err = finish(p)
                m = re.search(r"(\d+) packets? dropped by kernel", err)
                drops += int(m.group(1)) if m else 0
            if d:
                finish(d)
            mns = (m1 - m0) * 1e9 / max(1, sent)
            rows.append((n, lib, sent, drops, daemon_ns, sum(used) * 1e9 / max(1, sent), mns))
    print(f"Filters: {'one session each' if narrow else 'broad'}\n")
    print("| monitors | library | frames sent | dropped | the daemon ns/packet | all capturing processes ns/packet | kernel softirq ns/packet |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for n, lib, sent, drops, dns, ns, mns in rows:
        d = f"{dns:,.0f}" if lib == "sluice" else "-"
        print(f"| {n} | {lib} | {sent:,} | {drops:,} | {d} | {ns:,.0f} | {mns:,.0f} |")
    total = {(n, lib): ns + mns for n, lib, _, _, _, ns, mns in rows}
    for n in counts:
        a, b = total[(n, "libpcap")], total[(n, "sluice")]
        print(f"\n{n} monitors, processes + softirq: libpcap {a:,.0f} ns/packet, "
              f"sluice {b:,.0f} ns/packet ({a / max(1, b):.2f}x)")
    print()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=200_000)
    ap.add_argument("--sizes", default="1,100,1000")
    ap.add_argument("--monitors", default="1,2,4,8")
    ap.add_argument("--skip-monitors", action="store_true")
    ap.add_argument("--only-monitors", action="store_true")
    a = ap.parse_args()
    for exe in (SLUICE, ENDPOINTS):
        if not os.path.exists(exe):
            raise SystemExit(f"{exe} is missing: cargo build --release && cargo build --release --examples -p sluice-daemon")
    live.net_up()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)
            if not a.only_monitors:
                endpoints(tmp, [int(x) for x in a.sizes.split(",")], a.frames)
                syscalls(tmp, a.frames)
            if not a.skip_monitors:
                for narrow in (False, True):
                    monitors(tmp, [int(x) for x in a.monitors.split(",")], a.frames, narrow)
    finally:
        live.net_down()


if __name__ == "__main__":
    sys.exit(main())
