#!/usr/bin/env python3
"""What tcpdump users gain from sluice's libpcap: Debian's tcpdump on the
system libpcap beside the same binary on sluice (`sluice exec --`), in the
same run.

* `tcpdump -r BIG -w /dev/null` of a generated capture (TCP session
  traffic), with no filter, with a cheap filter (`tcp port 80`), and with
  a 10,000-host filter (`host a or host b or ...`): wall time, CPU per
  packet, peak memory. libpcap's optimiser is quadratic on the big filter
  (minutes, gigabytes); its run is cut at --libpcap-timeout seconds.
* `tcpdump -i` on a veth pair between two namespaces at the sender's top
  speed (`sluice replay --topspeed`, as scripts/bench-live.py), `tcp`
  (every frame) and one session filter (none of the traffic): received,
  dropped, CPU per packet.
* `bpf_filter` and `pcap_offline_filter` called by a C program
  (scripts/bench-filter.c) for every packet of the capture, once per
  expression, the program compiled by each library's own `pcap_compile`:
  nanoseconds per call (best of 7, thread CPU time); and libtrace's
  `tracestats` with three filters (it calls `bpf_filter` once per packet
  and filter) over the capture repeated to 4.4 M packets.

Usage: sudo scripts/bench-abi.py [--packets N] [--libpcap-timeout S]
                                 [--no-live] [--no-big-filter]
                                 [--no-tcpdump] [--no-filters]
Needs a release build (cargo build --release), tcpdump and, for the live
part, root and iproute2. Prints Markdown tables.
"""

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLUICE = os.path.join(ROOT, "target", "release", "sluice")
spec = importlib.util.spec_from_file_location("bench_live", os.path.join(ROOT, "scripts", "bench-live.py"))
live = importlib.util.module_from_spec(spec)
spec.loader.exec_module(live)
live.SLUICE = SLUICE


def on(lib, args):
    """The command on the system libpcap or on sluice's."""
    return args if lib == "libpcap" else [SLUICE, "exec", "--"] + args


def timed(cmd, timeout):
    """Wall seconds, CPU seconds and peak RSS (MB) of a command, or None
    when it ran out of time."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = t0 + timeout
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            p.kill()
            os.wait4(p.pid, 0)
            return None
        time.sleep(0.01)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd[:6])}...: failed: {err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def offline(a, work):
    big = os.path.join(work, "big.pcap")
    live.write_pcap(big, live.traffic(1000, a.packets, 128))
    mb = os.path.getsize(big) / 1e6
    hosts = os.path.join(work, "hosts")
    with open(hosts, "w") as f:
        f.write(" or ".join("host 10.%d.%d.%d" % ((i >> 16) & 255, (i >> 8) & 255, i & 255)
                            for i in range(1, 10_001)))
    print(f"\n### tcpdump -r: {a.packets:,} packets of 128 bytes ({mb:,.0f} MB), best of 3\n")
    print("| filter | libpcap time | libpcap CPU ns/packet | libpcap peak memory "
          "| sluice time | sluice CPU ns/packet | sluice peak memory | speed-up |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    cases = [("none", []), ("`tcp port 80`", ["tcp port 80"])]
    if not a.no_big_filter:
        cases.append(("10,000 hosts (`-F`)", ["-F", hosts]))
    for name, filt in cases:
        cells, walls = [], {}
        for lib in ("libpcap", "sluice"):
            cmd = on(lib, ["tcpdump", "-r", big, "-w", "/dev/null"] + filt)
            reps = 1 if filt[:1] == ["-F"] else 3
            best = None
            for _ in range(reps):
                r = timed(cmd, a.libpcap_timeout)
                if r is None:
                    break
                best = r if best is None or r[0] < best[0] else best
            if best is None:
                cells += [f"> {a.libpcap_timeout} s (cut)", "-", "-"]
                walls[lib] = None
                continue
            wall, cpu, rss = best
            walls[lib] = wall
            cells += [f"{wall:,.2f} s", f"{cpu / a.packets * 1e9:,.0f}", f"{rss:,.0f} MB"]
        if walls["libpcap"] and walls["sluice"]:
            up = f"{walls['libpcap'] / walls['sluice']:,.1f}×"
        else:
            up = f"> {a.libpcap_timeout / walls['sluice']:,.0f}×" if walls["sluice"] else "-"
        print(f"| {name} | " + " | ".join(cells) + f" | {up} |")
        sys.stdout.flush()


def live_part(a, work):
    live.net_up()
    try:
        out = os.path.join(work, "out.pcap")
        session = live.expression(live.session(0))
        for size in (64, 1514):
            pcap = os.path.join(work, f"traffic-{size}.pcap")
            live.write_pcap(pcap, live.traffic(1000, 100_000, size))
            alone = live.replay(pcap, 20)
            loops = max(1, round(5.0 * alone["pps"] / 100_000))
            print(f"\n### tcpdump -i, {size}-byte frames: sender alone {alone['pps']:,.0f} packets/s; "
                  f"{loops * 100_000:,} frames per run\n")
            print("| tcpdump on | filter | received by filter | dropped by kernel | dropped % | CPU ns/packet |")
            print("| --- | --- | --- | --- | --- | --- |")
            for what, expr in (("`tcp` (every frame)", "tcp"), ("one session (no frame)", session)):
                for lib in ("libpcap", "sluice"):
                    args = on(lib, ["tcpdump", "-Z", "root", "-i", "vb", "-w", out, expr])
                    stats, cpu, _ = live.measure(args, lib, pcap, loops)
                    rec, drop = stats["received by filter"], stats["dropped by kernel"]
                    per = f"{cpu / (rec - drop) * 1e9:,.0f}" if rec > drop else "-"
                    pct = 100.0 * drop / rec if rec else 0.0
                    print(f"| {lib} | {what} | {rec:,} | {drop:,} | {pct:.2f} | {per} |")
                    sys.stdout.flush()
    finally:
        live.net_down()


FILTERS = [
    "tcp port 80",
    "ip6 and not icmp6",
    "udp or arp",
    "host 10.0.0.1 or host 10.0.0.2",
    "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0 and not src net 10.0.0.0/8",
    "ip and tcp and dst port 80 and tcp[13] & 2 != 0",
    " or ".join("host 10.0.%d.%d" % (i >> 8, i & 255) for i in range(1, 40)),
    "",
]


def filter_part(a, work):
    """bpf_filter and pcap_offline_filter per call, and tracestats."""
    big = os.path.join(work, "filters.pcap")
    n = min(a.packets, 200_000)
    live.write_pcap(big, live.traffic(1000, n, 128))
    prog = os.path.join(work, "bench-filter")
    subprocess.run(["cc", "-O2", "-o", prog, os.path.join(ROOT, "scripts", "bench-filter.c"), "-lpcap"],
                   check=True)
    rows = {}
    for lib in ("libpcap", "sluice"):
        out = subprocess.run(on(lib, [prog, big, "3"] + FILTERS), capture_output=True, text=True, check=True)
        for line in out.stdout.splitlines():
            expr, func, ns, acc = line.split("\t")
            rows.setdefault((expr, func), {})[lib] = (float(ns), int(acc))
    print(f"\n### bpf_filter and pcap_offline_filter: {n:,} packets of 128 bytes, ns per call "
          "(best of 7, thread CPU time)\n")
    print("| expression | function | libpcap | sluice | speed-up |")
    print("| --- | --- | --- | --- | --- |")
    for (expr, func), r in rows.items():
        (lns, lacc), (sns, sacc) = r["libpcap"], r["sluice"]
        if lacc != sacc:
            raise SystemExit(f"{expr} {func}: libpcap accepts {lacc}, sluice {sacc}")
        shown = expr if len(expr) < 70 else expr[:40] + f"... ({expr.count(' or ') + 1} terms)"
        print(f"| `{shown}` | {func} | {lns:.1f} | {sns:.1f} | {lns / sns:.2f}× |")
    if not shutil.which("tracestats"):
        print("\n(tracestats skipped: apt-get install libtrace-tools)")
        return
    huge = os.path.join(work, "tracestats.pcap")
    with open(big, "rb") as f:
        data = f.read()
    copies = max(1, 4_400_000 // n)
    with open(huge, "wb") as f:
        f.write(data[:24])
        for _ in range(copies):
            f.write(data[24:])
    os.remove(big)
    exprs = ["tcp port 80", "ip6 and not icmp6", "udp or arp"]
    cmd = ["tracestats"] + [x for e in exprs for x in ("-f", e)] + ["pcapfile:" + huge]
    print(f"\n### tracestats, three filters, {n * copies:,} packets, best of 3\n")
    print("| | libpcap | sluice | speed-up |")
    print("| --- | --- | --- | --- |")
    best = {}
    for lib in ("libpcap", "sluice"):
        best[lib] = min(timed(on(lib, cmd), a.libpcap_timeout) for _ in range(3))
    (lw, lc, _), (sw, sc, _) = best["libpcap"], best["sluice"]
    print(f"| wall time | {lw:.2f} s | {sw:.2f} s | {lw / sw:.2f}× |")
    print(f"| CPU time | {lc:.2f} s | {sc:.2f} s | {lc / sc:.2f}× |")
    os.remove(huge)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--packets", type=int, default=2_000_000)
    p.add_argument("--libpcap-timeout", type=int, default=1800)
    p.add_argument("--no-live", action="store_true")
    p.add_argument("--no-big-filter", action="store_true")
    p.add_argument("--no-tcpdump", action="store_true")
    p.add_argument("--no-filters", action="store_true")
    a = p.parse_args()
    if not os.path.exists(SLUICE):
        raise SystemExit("build first: cargo build --release")
    out = subprocess.run(on("sluice", ["tcpdump", "--version"]), capture_output=True, text=True)
    print(f"cores: {os.cpu_count()}; {out.stdout.splitlines()[1] if out.stdout else out.stderr}")
    work = tempfile.mkdtemp(prefix="sluice-abi-bench-")
    try:
        if not a.no_tcpdump:
            offline(a, work)
        if not a.no_filters:
            filter_part(a, work)
        if not a.no_live and not a.no_tcpdump:
            if os.geteuid() != 0:
                print("\n(live part skipped: needs root)")
            else:
                live_part(a, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
