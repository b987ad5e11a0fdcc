#!/usr/bin/env python3
"""Kernel-stage benchmark (issue 34): `sluice split -i --count` with the
filters judged in user space only, behind the classic BPF pre-filter, as
one eBPF program chain counting in the kernel (the socket filter), and as
that chain in XDP too (`--xdp`: counted and, when no filter wants them,
dropped before the kernel's stack).

The live benchmark's network (two namespaces joined by a veth pair, see
scripts/bench-live.py), frames sent at the sender's top speed. Session
sets: 64-byte TCP frames, 1% of them of sessions of the set, 99% of
sessions of no filter. Generated sets (`--generated N`): sluice_workload's
heterogeneous filters and their own traffic (most frames match some
filter). For each run: the frames the kernel passed to the ring and
dropped, the capturer's CPU (user + system, every thread, from /proc,
start-up excluded) per frame sent, the eBPF programs' own run time per
frame sent (`kernel.bpf_stats_enabled`, run_time_ns of every program
named sluice, from bpftool, in a run of its own: the statistics cost CPU
too), the total CPU per frame sent: the sender's
(user and system, its rusage: on a veth pair the receive path often runs
in the sender's system calls), the capturer's, and the time every CPU
spent in softirq and irq (/proc/stat) while the traffic ran, so that
other work on the machine stays out of it; the sender's part is about
the same in every row, so rows differ by what the capture costs, the
kernel's receive path included. And whether the counts equal the
user-space run's. Prints one Markdown table.

Usage: sudo scripts/bench-kernel.py [--packets N] [--seconds S] [--sizes 1000,100000] [--rounds 3] [--generated 1000]
Needs root, a release build (cargo build --release), bpftool, iproute2.
"""

import argparse
import importlib.util
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("bench_live", os.path.join(HERE, "bench-live.py"))
live = importlib.util.module_from_spec(spec)
spec.loader.exec_module(live)


# sluice_workload's generator (heterogeneous filter sets and their traffic).
GEN = ["cargo", "run", "--release", "-q", "-p", "sluice-workload", "--example", "gen", "--"]


def traffic(n_sessions, count, wanted=0.01):
    """`wanted` of the frames of sessions of the set, the rest of none."""
    r = random.Random(n_sessions)
    out = []
    for _ in range(count):
        if r.random() < wanted:
            s = live.session(r.randrange(n_sessions))
        else:
            s = live.session(10_000_000 + r.randrange(100_000))
        out.append(live.frame(s, 64))
    return out


def bpf_run_ns():
    """Run time (ns) of every BPF program named sluice, by program id."""
    o = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True)
    return {p["id"]: p.get("run_time_ns", 0) for p in json.loads(o.stdout)
            if p.get("name", "").startswith("sluice")}


def ran_ns(before, after):
    """Run time between two bpf_run_ns() of the programs alive at the
    second (a program of an earlier run may still be listed at the
    first)."""
    return sum(ns - before.get(i, 0) for i, ns in after.items())


def irq_ns():
    """Time every CPU spent in irq and softirq, ns."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    irq, softirq = int(fields[5]), int(fields[6])
    return (irq + softirq) * 1e9 / os.sysconf("SC_CLK_TCK")


def children_ns():
    """User and system time of this script's finished children, ns."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * 1e9


def counts(out):
    """name -> count from `split --count`'s lines."""
    got = {}
    for line in out.decode().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[-1].isdigit():
            got[parts[0]] = int(parts[-1])
    return got


def stats(on):
    """kernel.bpf_stats_enabled on or off."""
    subprocess.run(["sysctl", "-qw", f"kernel.bpf_stats_enabled={int(on)}"], check=True)


def measure(path, extra, tag, pcap, loops):
    """One run of `split -i --count` with `extra` options (None: no
    capturer) while the traffic is sent: per frame sent, the capturer's
    CPU, the eBPF programs' run time and the total CPU."""
    args = [live.SLUICE, "split", "-i", "vb", "--workers", "1", "--filters", path, "--count"]
    ns0 = bpf_run_ns()
    run = live.Run(args + extra, tag) if extra is not None else None
    cpu0 = live.settled_cpu(run.proc.pid) if run else 0
    irq0, snd0 = irq_ns(), children_ns()
    sent = live.replay(pcap, loops)["sent"]
    snd1 = children_ns()
    time.sleep(1.5)
    cpu1 = live.proc_cpu(run.proc.pid) if run else 0
    irq1 = irq_ns()
    ns1 = bpf_run_ns()
    stats, out = run.stop() if run else ({"received by filter": 0, "dropped by kernel": 0}, None)
    capturer = (cpu1 - cpu0) * 1e9
    return {
        "sent": sent,
        "rec": stats["received by filter"],
        "drop": stats["dropped by kernel"],
        "capturer": capturer / sent,
        "bpf": ran_ns(ns0, ns1) / sent,
        "total": (capturer + snd1 - snd0 + irq1 - irq0) / sent,
        "counts": counts(out) if out is not None else None,
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--packets", type=int, default=100_000)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--sizes", default="1000,100000")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--generated", type=int, default=1000,
                   help="also N generated heterogeneous filters on their own traffic (0: not)")
    a = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench-kernel needs root")
    work = tempfile.mkdtemp(prefix="sluice-kernel-bench-")
    try:
        live.net_up()
        print(f"cores: {os.cpu_count()}, kernel {os.uname().release}")
        print()
        print("| filter set | judged | frames sent | passed to the ring | dropped by kernel | capturer CPU ns/frame sent | eBPF run ns/frame sent | total CPU ns/frame sent (sender + capturer + irq) | counts = user space |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        sets = [(f"{n:,} sessions", n) for n in (int(x) for x in a.sizes.split(",") if x)]
        if a.generated:
            sets.append((f"{a.generated:,} generated", -a.generated))
        for label, n in sets:
            path = os.path.join(work, f"set-{n}.txt")
            pcap = os.path.join(work, f"traffic-{n}.pcap")
            if n > 0:
                with open(path, "w") as f:
                    for i in range(n):
                        f.write(f"s{i}\t{live.expression(live.session(i))}\n")
                live.write_pcap(pcap, traffic(n, a.packets))
            else:
                # sluice_workload's heterogeneous rules and their traffic.
                with open(path, "w") as f:
                    subprocess.run(GEN + ["filters", str(-n), "1"], stdout=f, check=True)
                subprocess.run(GEN + ["traffic", str(a.packets), "1", pcap, str(-n)], check=True)
            alone = live.replay(pcap, max(1, int(2_000_000 / a.packets)))
            loops = max(1, round(a.seconds * alone["pps"] / a.packets))
            configs = (("no capture (the sender alone)", None),
                       ("user space only", ["--no-kernel-filter"]),
                       ("classic BPF pre-filter", []),
                       ("eBPF chain, counting in the kernel", ["--engine", "ebpf"]),
                       ("eBPF chain in XDP too (--xdp)", ["--engine", "ebpf", "--xdp"]))
            rows = {tag: [] for tag, _ in configs}
            base = None
            # Rounds alternate the configurations, so that a slow spell of
            # the machine touches them all; the table gives medians.
            for _ in range(a.rounds):
                for tag, extra in configs:
                    row = measure(path, extra, tag, pcap, loops)
                    if extra is not None and "ebpf" in extra:
                        # The kernel's statistics time every run, which
                        # costs CPU itself: the programs' run time from a
                        # second run with them on.
                        stats(True)
                        row["bpf"] = measure(path, extra, tag, pcap, loops)["bpf"]
                        stats(False)
                    if row["counts"] is not None:
                        base = base or row["counts"]
                        row["same"] = row["counts"] == base
                    rows[tag].append(row)
            for tag, _ in configs:
                rs = rows[tag]
                med = {k: statistics.median(r[k] for r in rs)
                       for k in ("sent", "rec", "drop", "capturer", "bpf", "total")}
                same = "-" if rs[0]["counts"] is None else ("yes" if all(r["same"] for r in rs) else "no")
                print(f"| {label} | {tag} | {med['sent']:,.0f} | {med['rec']:,.0f} | {med['drop']:,.0f} | "
                      f"{med['capturer']:,.1f} | {med['bpf']:,.1f} | {med['total']:,.1f} | {same} |")
                sys.stdout.flush()
    finally:
        subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=0"])
        live.net_down()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
