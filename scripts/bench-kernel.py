#!/usr/bin/env python3
"""Kernel-stage benchmark (issue 34): `sluice split -i --count` with the
filters judged in user space only, behind the classic BPF pre-filter, and
as one eBPF program chain counting in the kernel.

The live benchmark's network (two namespaces joined by a veth pair, see
scripts/bench-live.py), 64-byte TCP frames sent at the sender's top
speed; 1% of them belong to sessions of the filter set, 99% to sessions
of no filter. For each run: the frames the kernel passed to the ring and
dropped, the capturer's CPU (user + system, every thread, from /proc,
start-up excluded) per frame sent, the eBPF programs' own run time per
frame sent (`kernel.bpf_stats_enabled`, run_time_ns of every program
named sluice, from bpftool), and whether the counts equal the user-space
run's. Prints one Markdown table.

Usage: sudo scripts/bench-kernel.py [--packets N] [--seconds S] [--sizes 1000,100000]
Needs root, a release build (cargo build --release), bpftool, iproute2.
"""

import argparse
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("bench_live", os.path.join(HERE, "bench-live.py"))
live = importlib.util.module_from_spec(spec)
spec.loader.exec_module(live)


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
    """Total run time (ns) and runs of every BPF program named sluice."""
    o = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True)
    ns = runs = 0
    for p in json.loads(o.stdout):
        if p.get("name", "").startswith("sluice"):
            ns += p.get("run_time_ns", 0)
            runs += p.get("run_cnt", 0)
    return ns, runs


def counts(out):
    """name -> count from `split --count`'s lines."""
    got = {}
    for line in out.decode().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[-1].isdigit():
            got[parts[0]] = int(parts[-1])
    return got


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--packets", type=int, default=100_000)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--sizes", default="1000,100000")
    a = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench-kernel needs root")
    work = tempfile.mkdtemp(prefix="sluice-kernel-bench-")
    subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        live.net_up()
        print(f"cores: {os.cpu_count()}, kernel {os.uname().release}")
        print()
        print("| filters | judged | frames sent | passed to the ring | dropped by kernel | capturer CPU ns/frame sent | eBPF run ns/frame sent | counts = user space |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for n in (int(x) for x in a.sizes.split(",")):
            path = os.path.join(work, f"sessions-{n}.txt")
            with open(path, "w") as f:
                for i in range(n):
                    f.write(f"s{i}\t{live.expression(live.session(i))}\n")
            pcap = os.path.join(work, f"traffic-{n}.pcap")
            live.write_pcap(pcap, traffic(n, a.packets))
            alone = live.replay(pcap, max(1, int(2_000_000 / a.packets)))
            loops = max(1, round(a.seconds * alone["pps"] / a.packets))
            base = None
            for tag, extra in (("user space only", ["--no-kernel-filter"]),
                               ("classic BPF pre-filter", []),
                               ("eBPF chain, counting in the kernel", ["--engine", "ebpf"])):
                args = [live.SLUICE, "split", "-i", "vb", "--workers", "1", "--filters", path, "--count"] + extra
                ns0, _ = bpf_run_ns()
                run = live.Run(args, tag)
                cpu0 = live.settled_cpu(run.proc.pid)
                sent = live.replay(pcap, loops)["sent"]
                import time
                time.sleep(1.5)
                cpu1 = live.proc_cpu(run.proc.pid)
                ns1, _ = bpf_run_ns()
                stats, out = run.stop()
                got = counts(out)
                if base is None:
                    base = got
                same = "yes" if got == base else f"no ({sum(got.values())} vs {sum(base.values())})"
                rec, drop = stats["received by filter"], stats["dropped by kernel"]
                print(f"| {n:,} | {tag} | {sent:,} | {rec:,} | {drop:,} | {(cpu1 - cpu0) / sent * 1e9:,.1f} | "
                      f"{(ns1 - ns0) / sent:,.1f} | {same} |")
                sys.stdout.flush()
    finally:
        subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=0"])
        live.net_down()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
