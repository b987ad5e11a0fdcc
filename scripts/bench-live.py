#!/usr/bin/env python3
"""Live capture benchmark: packets received and dropped on a veth pair.

Builds two network namespaces joined by a veth pair, sends TCP session
traffic (64-byte and 1,514-byte frames) from one side with
`sluice replay --topspeed`, and captures on the other side with:

* tcpdump with one session filter, writing to a file;
* `sluice filter -i` with the same filter, writing to a file;
* `sluice split -i --count` with 1, 1,000 and 100,000 session filters,
  with --workers 1 and 2.

For each it reports packets received by the kernel filter, dropped by the
kernel, and the capturer's CPU time (user + system, every thread, from
/proc) while the traffic ran, per packet that reached it; start-up
(compiling and merging the filters) is left out by reading the CPU time
once the capturer sits idle. The file path's CPU per packet (`sluice
split -r` of the same packets, 20 times over, read from a pipe, start-up
left out the same way) is measured beside it. Prints one Markdown table
per frame size.

Usage: sudo scripts/bench-live.py [--packets N] [--seconds S]
                                  [--sizes 1,1000,100000] [--frames 64,1514]
Needs root, a release build (cargo build --release), tcpdump and iproute2.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLUICE = os.path.join(ROOT, "target", "release", "sluice")
NS_A, NS_B = "slbench-a", "slbench-b"


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


def net_up():
    net_down()
    sh("ip", "netns", "add", NS_A)
    sh("ip", "netns", "add", NS_B)
    sh("ip", "link", "add", "va", "netns", NS_A, "type", "veth", "peer", "name", "vb", "netns", NS_B)
    for ns, dev in ((NS_A, "va"), (NS_B, "vb")):
        for key in ("all", "default", dev):
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1")
        sh("ip", "-n", ns, "link", "set", dev, "up")
    for _ in range(500):
        if "state UP" in sh("ip", "-n", NS_B, "link", "show", "vb").stdout:
            break
        time.sleep(0.02)


def net_down():
    sh("ip", "netns", "del", NS_A, check=False)
    sh("ip", "netns", "del", NS_B, check=False)


def session(i):
    """Session i: (src, dst, sport, dport), spread like the classifier bench."""
    r = random.Random(i * 7919 + 13)
    src = 0x0A000000 | r.getrandbits(24)
    dst = 0xC0A80000 | r.getrandbits(16)
    return src, dst, 1024 + r.randrange(60000), r.choice((80, 443, 8080, 5432, 6379))


def ip(a):
    return ".".join(str((a >> s) & 255) for s in (24, 16, 8, 0))


def expression(s):
    src, dst, sp, dp = s
    return f"tcp and src host {ip(src)} and dst host {ip(dst)} and src port {sp} and dst port {dp}"


def frame(s, size):
    src, dst, sp, dp = s
    payload = size - 54
    eth = bytes.fromhex("020000000002020000000001") + b"\x08\x00"
    iph = struct.pack("!BBHHHBBHII", 0x45, 0, 20 + 20 + payload, 1, 0x4000, 64, 6, 0, src, dst)
    tcp = struct.pack("!HHIIBBHHH", sp, dp, 1, 0, 0x50, 0x18, 65535, 0, 0)
    return eth + iph + tcp + bytes(payload)


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", i // 1000000, i % 1000000, len(fr), len(fr)))
            f.write(fr)


def traffic(n_sessions, count, size):
    """90% frames of a session of the largest set, 10% of no session."""
    r = random.Random(size)
    out = []
    for _ in range(count):
        if r.random() < 0.9:
            s = session(r.randrange(n_sessions))
        else:
            s = session(10_000_000 + r.randrange(1000))
        out.append(frame(s, size))
    return out


def proc_cpu(pid):
    """User + system CPU seconds of a running process, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settled_cpu(pid):
    """The CPU time of a process once it has stopped using CPU (its
    start-up work done, waiting for packets)."""
    last = proc_cpu(pid)
    while True:
        time.sleep(0.3)
        now = proc_cpu(pid)
        if now - last < 0.02:
            return now
        last = now


class Run:
    """A capturer in the capturing namespace, its CPU time measured."""

    def __init__(self, args, tag):
        self.tag = tag
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", NS_B] + args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.err = ""
        # Wait for "listening on" on stderr.
        os.set_blocking(self.proc.stderr.fileno(), False)
        deadline = time.time() + 120
        while "listening on" not in self.err:
            chunk = self.proc.stderr.read()
            if chunk:
                self.err += chunk.decode(errors="replace")
            if self.proc.poll() is not None:
                raise SystemExit(f"{tag}: exited before listening: {self.err}")
            if time.time() > deadline:
                raise SystemExit(f"{tag}: not listening after 120 s")
            time.sleep(0.02)

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        os.set_blocking(self.proc.stderr.fileno(), True)
        out, err = self.proc.communicate(timeout=120)
        self.err += err.decode(errors="replace")
        stats = {}
        for what in ("captured", "received by filter", "dropped by kernel", "dropped by sluice"):
            m = re.search(rf"(\d+) packets? {what}", self.err)
            stats[what] = int(m.group(1)) if m else None
        # sluice names its own drops only when there were some.
        stats["dropped by sluice"] = stats["dropped by sluice"] or 0
        return stats, out


def replay(path, loops):
    o = sh(
        "ip", "netns", "exec", NS_A, SLUICE, "replay", "-i", "va", "-r", path,
        "--topspeed", "--loop", str(loops), "--json",
    )
    return json.loads(o.stdout)


def measure(args, tag, pcap, loops):
    """Received, dropped, and the CPU time the capturer spent while the
    traffic ran (start-up excluded: measured from when it sits idle)."""
    run = Run(args, tag)
    cpu0 = settled_cpu(run.proc.pid)
    sent = replay(pcap, loops)
    time.sleep(1.5)
    cpu1 = proc_cpu(run.proc.pid)
    stats, _ = run.stop()
    return stats, cpu1 - cpu0, sent


def file_cpu(filters, pcap, loops):
    """CPU per packet of `sluice split -r` reading the same packets `loops`
    times from a pipe, start-up excluded (measured once it waits for the
    first packet)."""
    fifo = pcap + ".fifo"
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    proc = subprocess.Popen([SLUICE, "split", "-r", fifo, "--filters", filters, "--count"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(pcap, "rb") as f:
        data = f.read()
    head, body = data[:24], data[24:]
    packets = 0
    with open(fifo, "wb") as w:
        w.write(head)
        w.flush()
        cpu0 = settled_cpu(proc.pid)
        for _ in range(loops):
            w.write(body)
        packets = loops * count_packets(body)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = status
    return (usage.ru_utime + usage.ru_stime - cpu0) / packets


def count_packets(body):
    n, at = 0, 0
    while at + 16 <= len(body):
        at += 16 + struct.unpack("<I", body[at + 8:at + 12])[0]
        n += 1
    return n


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--packets", type=int, default=100_000, help="frames in the traffic file")
    p.add_argument("--seconds", type=float, default=5.0, help="seconds of traffic per run, at the sender's top speed")
    p.add_argument("--sizes", default="1,1000,100000")
    p.add_argument("--frames", default="64,1514")
    a = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench-live needs root (network namespaces)")
    if not os.path.exists(SLUICE):
        raise SystemExit("build first: cargo build --release")
    sizes = [int(x) for x in a.sizes.split(",")]
    work = tempfile.mkdtemp(prefix="sluice-live-bench-")
    try:
        net_up()
        biggest = max(sizes)
        sets = {}
        for n in sizes:
            path = os.path.join(work, f"sessions-{n}.txt")
            with open(path, "w") as f:
                for i in range(n):
                    f.write(f"s{i}\t{expression(session(i))}\n")
            sets[n] = path
        one_filter = expression(session(0))
        print(f"cores: {os.cpu_count()}, kernel {os.uname().release}")
        for size in (int(x) for x in a.frames.split(",")):
            pcap = os.path.join(work, f"traffic-{size}.pcap")
            write_pcap(pcap, traffic(biggest, a.packets, size))
            alone = replay(pcap, max(1, int(2_000_000 / a.packets)))
            loops = max(1, round(a.seconds * alone["pps"] / a.packets))
            print(f"\n### {size}-byte frames: sender alone {alone['pps']:,.0f} packets/s "
                  f"({alone['mbps']:,.0f} Mbit/s); {loops * a.packets:,} frames per run\n")
            print("| capturer | filters | workers | received | dropped by kernel | dropped by sluice | dropped % | CPU ns/packet | file path CPU ns/packet |")
            print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
            out = os.path.join(work, "out.pcap")
            rows = []
            for what, expr in (("`tcp` (every frame)", "tcp"), ("one session", one_filter)):
                rows.append((f"tcpdump -w, {what}", 1, "-", ["tcpdump", "-Z", "root", "-i", "vb", "-w", out, expr], None))
                rows.append((f"sluice filter -i -w, {what}", 1, "1",
                             [SLUICE, "filter", "-i", "vb", "--workers", "1", "-w", out, expr], None))
            for n in sizes:
                for w in ("1", "2"):
                    rows.append((f"sluice split -i --count", n, w,
                                 [SLUICE, "split", "-i", "vb", "--workers", w, "--filters", sets[n], "--count"], sets[n]))
            for tag, n, w, args, filters in rows:
                stats, cpu, sent = measure(args, tag, pcap, loops)
                rec, drop = stats["received by filter"], stats["dropped by kernel"]
                ours = stats["dropped by sluice"] if tag.startswith("sluice") else "-"
                per = f"{cpu / (rec - drop) * 1e9:,.0f}" if rec > drop else "-"
                fcpu = f"{file_cpu(filters, pcap, 20) * 1e9:,.0f}" if filters else "-"
                lost = drop + (ours if ours != "-" else 0)
                pct = 100.0 * lost / rec if rec else 0.0
                ours = f"{ours:,}" if ours != "-" else ours
                print(f"| {tag} | {n:,} | {w} | {rec:,} | {drop:,} | {ours} | {pct:.2f} | {per} | {fcpu} |")
                sys.stdout.flush()
    finally:
        net_down()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
