"""Live packets in Python, on a private network of two namespaces joined by
a veth pair: flows opened from Python in a ``sluice daemon`` capturing on
one end, and ``sluice.LiveCapture`` on that end, while ``sluice replay``
sends captures from the other; what Python gets is compared with what
Debian's tcpdump (libpcap) keeps of a capture of the same traffic."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List

import pytest

import sluice
from conftest import CORPUS, SAMPLE
from netns import Net, libpcap_frames, need_root, settle

# Ethernet captures with VLAN tags (one and two), GRE, TCP, UDP, ARP.
CAPTURES = ["various_gre.pcap", "802.1ad_QinQ.pcap", "ipv4_tcp_http_xml.pcap", "kday4.pcap"]


def udp_pcap(path: Path, n: int) -> Path:
    """n Ethernet/IPv4/UDP frames of varying size, frame i carrying i."""
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for i in range(n):
        body = struct.pack(">I", i) + bytes((i * 7919) % 1200)
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 28 + len(body), i & 0xFFFF, 0, 64, 17, 0,
                         bytes([10, 0, 0, i % 7]), bytes([10, 0, 1, 1]))
        udp = struct.pack(">HHHH", 1000 + i % 5, 53 if i % 3 == 0 else 80, 8 + len(body), 0)
        frame = b"\x02" + bytes(5) + b"\x02\x01\x02\x03\x04\x05\x08\x00" + ip + udp + body
        out += struct.pack("<IIII", 1_700_000_000, i, len(frame), len(frame)) + frame
    path.write_bytes(bytes(out))
    return path


@pytest.fixture
def net(request, sluice_bin):  # type: ignore[no-untyped-def]
    need_root("live capture")
    n = Net(request.node.name[:40])
    yield n
    n.close()


def traffic(net: Net, sluice_bin: Path) -> int:
    """Send the sample, some corpus captures and 2,000 UDP frames."""
    files = [SAMPLE] + [CORPUS / "pcaps" / c for c in CAPTURES if (CORPUS / "pcaps" / c).exists()]
    files.append(udp_pcap(net.file("udp.pcap"), 2000))
    return sum(net.replay(sluice_bin, f) for f in files)


def start_daemon(net: Net, sluice_bin: Path, *extra: str) -> Path:
    sock = net.file("d.sock")
    d = net.start(net.b, str(sluice_bin), "daemon", "-i", "vb", "--socket", str(sock), *extra)
    d.wait_for("listening on")
    return sock


def drain(flow: sluice.DaemonFlow) -> List[bytes]:
    """Every packet waiting in a flow."""
    got = []
    while True:
        p = flow.next(timeout=0)
        if p is None:
            return got
        got.append(p[1])


EXPRS = ["tcp", "vlan and ip", "udp or icmp", "not arp", "udp port 53", ""]


def test_daemon_flows_keep_what_libpcap_keeps(net, sluice_bin):
    sock = start_daemon(net, sluice_bin)
    with sluice.Daemon(sock, name="pytest") as d:
        assert d.interfaces == [{"name": "vb", "linktype": 1, "snaplen": d.interfaces[0]["snaplen"]}]
        assert d.mode == "monitor"
        flows = [d.flow(e) for e in EXPRS]
        batched = d.flow('(iface,vb) -> (BPF,"udp")')
        all_pcap = net.file("all.pcap")
        dump = net.tcpdump(all_pcap)
        sent = traffic(net, sluice_bin)
        settle()
        assert dump.interrupt() == 0
        assert len(libpcap_frames(all_pcap, "", net.file("n.pcap"))) == sent
        status = d.status()
        assert any(c.get("name") == "pytest" for c in status["clients"]), status
        for i, (expr, f) in enumerate(zip(EXPRS, flows)):
            want = libpcap_frames(all_pcap, expr, net.file(f"w{i}.pcap"))
            assert want, f"{expr!r}: the traffic exercises it"
            got = drain(f)
            assert got == want, expr
            s = f.stats()
            assert s == {"accepted": len(want), "delivered": len(want), "lost": 0, "waiting": 0}, expr
        # Batches: the same frames as libpcap keeps, in order, in one
        # buffer, with their wire lengths and time stamps.
        want = libpcap_frames(all_pcap, "udp", net.file("wu.pcap"))
        frames: List[bytes] = []
        for b in batched.batches(max_packets=500, latency=0.05):
            assert len(b) <= 500
            frames += [b.data[b.offsets[i]:b.offsets[i + 1]] for i in range(len(b))]
            assert list(b.wirelens) == [len(x) for x in frames[-len(b):]]
            assert all(b.linktypes == 1)
            if len(frames) >= len(want):
                break
        assert frames == want
        assert batched.read_batch(timeout=0.05).__len__() == 0
        t = sluice.to_arrow(batched.read_batch(timeout=0))
        assert t.num_rows == 0 and t.column_names == ["timestamp", "wirelen", "linktype", "frame"]
        for f in flows + [batched]:
            f.close()
        with pytest.raises(ValueError):
            flows[0].next(timeout=0)


def test_set_filter_stats_and_errors(net, sluice_bin):
    sock = start_daemon(net, sluice_bin)
    d = sluice.Daemon(sock)
    with pytest.raises(sluice.FilterError) as e:
        d.flow("tcp prt 80")
    assert e.value.column is not None
    with d.flow("udp") as f:
        sample = net.file("s.pcap")
        sample.write_bytes(SAMPLE.read_bytes())
        net.replay(sluice_bin, sample)
        settle()
        udp = subprocess.run([str(sluice_bin), "filter", "-r", str(SAMPLE), "--count", "udp"],
                             capture_output=True, text=True, check=True).stdout.strip()
        assert len(drain(f)) == int(udp)
        f.set_filter("tcp")
        assert "tcp" in f.spec
        net.replay(sluice_bin, sample)
        settle()
        tcp = subprocess.run([str(sluice_bin), "filter", "-r", str(SAMPLE), "--count", "tcp"],
                             capture_output=True, text=True, check=True).stdout.strip()
        assert len(drain(f)) == int(tcp)
        s = f.stats()
        assert s["delivered"] + s["lost"] == s["accepted"] == int(udp) + int(tcp)
        with pytest.raises(sluice.FilterError):
            f.set_filter("udp and")
        assert sluice.wait_any([f], timeout=0.05) == []
    d.close()
    with pytest.raises(ValueError):
        d.flow("tcp")


def test_a_daemon_that_goes_away_ends_the_flow_with_an_error(net, sluice_bin):
    sock = net.file("d.sock")
    daemon = net.start(net.b, str(sluice_bin), "daemon", "-i", "vb", "--socket", str(sock))
    daemon.wait_for("listening on")
    f = sluice.Daemon(sock).flow("")
    killer = threading.Timer(0.5, lambda: daemon.signal(signal.SIGKILL))
    killer.start()
    start = time.monotonic()
    with pytest.raises((ConnectionError, EOFError)):
        f.next(timeout=10)
    assert time.monotonic() - start < 5
    # Iterating ends (ConnectionError), never hangs.
    with pytest.raises((ConnectionError, EOFError)):
        for _ in f:
            pass


# ----- live capture, in a Python process inside the capturing namespace -----

LIVE_SCRIPT = r"""
import json, sys
import sluice
args = json.loads(sys.argv[1])
out = args.pop("out")
with sluice.LiveCapture("vb", **args) as cap:
    print("listening on vb", file=sys.stderr, flush=True)
    w = sluice.Writer(out)
    for b in cap:
        w.write_batch(b)
    w.close()
    print(json.dumps({"stats": cap.stats(), "interrupted": cap.interrupted,
                      "report": cap.report(), "kernel_filter": cap.kernel_filter}))
"""


def live(net: Net, **args) -> "subprocess.Popen[bytes]":  # type: ignore[no-untyped-def]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    bg = net.start(net.b, sys.executable, "-c", LIVE_SCRIPT, json.dumps(args), env=env)
    bg.wait_for("listening on")
    return bg


def frames_of(path: Path) -> List[bytes]:
    with sluice.open(path) as r:
        return [f for _, f in r]


@pytest.mark.parametrize("expr", ["udp or icmp", "vlan and ip", ""])
def test_live_capture_keeps_what_libpcap_keeps(net, sluice_bin, expr):
    got = net.file("got.pcap")
    cap = live(net, filter=expr, out=str(got), workers=2, max_packets=300)
    all_pcap = net.file("all.pcap")
    dump = net.tcpdump(all_pcap)
    sent = traffic(net, sluice_bin)
    settle()
    assert dump.interrupt() == 0
    # Ctrl-C stops the capture cleanly: every packet before it comes.
    assert cap.interrupt() == 0, cap.stderr()
    result = json.loads(cap.out.decode().strip().splitlines()[-1])
    want = libpcap_frames(all_pcap, expr, net.file("want.pcap"))
    assert len(libpcap_frames(all_pcap, "", net.file("n.pcap"))) == sent
    assert frames_of(got) == want
    assert result["interrupted"] is True
    s = result["stats"]
    assert s["finished"] and s["captured"] == len(want) and s["dropped"] == 0
    assert s["packets"] >= s["captured"] and len(s["workers"]) == 2
    assert result["report"].startswith(f"{len(want)} packet")
    if expr:
        assert result["kernel_filter"] is not None


def test_live_capture_stops_at_a_count_and_writes_rotated_files(net, sluice_bin):
    got = net.file("got.pcap")
    cap = live(net, filter="udp", count=700, out=str(got), workers=1,
               write=str(net.file("ring.pcap")), file_size=100_000)
    traffic(net, sluice_bin)
    assert cap.wait(30) == 0, cap.stderr()
    result = json.loads(cap.out.decode().strip().splitlines()[-1])
    assert result["interrupted"] is False
    assert result["stats"]["captured"] == 700
    frames = frames_of(got)
    assert len(frames) == 700
    # The rotated files hold the same packets, in order: ring.pcap, ring.pcap1...
    parts = sorted(net.dir.glob("ring.pcap*"), key=lambda p: int(p.name[9:] or 0))
    assert len(parts) > 1
    assert [f for p in parts for f in frames_of(p)] == frames
    assert all(p.stat().st_size < 100_000 + 2000 for p in parts[:-1])


def test_live_capture_stops_after_its_duration(net, sluice_bin):
    got = net.file("got.pcap")
    start = time.monotonic()
    cap = live(net, filter="tcp", duration=1.0, out=str(got))
    assert cap.wait(20) == 0, cap.stderr()
    assert time.monotonic() - start < 10
    result = json.loads(cap.out.decode().strip().splitlines()[-1])
    assert result["stats"]["captured"] == 0 and frames_of(got) == []


def test_live_capture_refuses_bad_input():
    with pytest.raises(ValueError):
        sluice.LiveCapture("lo", count=0)
    with pytest.raises(ValueError):
        sluice.LiveCapture("lo", file_size=10)
    with pytest.raises(OSError):
        sluice.LiveCapture("no-such-interface0")
    if os.geteuid() == 0:
        with pytest.raises(sluice.FilterError):
            sluice.LiveCapture("lo", "tcp prt 80")


def test_filters_with_memory_report_from_the_daemon(net, sluice_bin):
    sock = start_daemon(net, sluice_bin)
    with sluice.Daemon(sock, name="memory") as d:
        counted = d.flow('(iface,vb) -> (BPF,"tcp") -> (packetcount,pass)')
        hashed = d.flow('(iface,vb) -> (BPF,"ip and tcp and ip[6:2] & 0x1fff = 0") -> (hashcount,100000,65536)')
        plain = d.flow("udp")
        all_pcap = net.file("all.pcap")
        dump = net.tcpdump(all_pcap)
        traffic(net, sluice_bin)
        settle()
        assert dump.interrupt() == 0
        tcp = libpcap_frames(all_pcap, "tcp", net.file("t.pcap"))
        first = libpcap_frames(all_pcap, "ip and tcp and ip[6:2] & 0x1fff = 0", net.file("f.pcap"))
        assert tcp and first, "the traffic exercises it"
        # The counter passes packets on and counts each.
        assert drain(counted) == tcp
        assert counted.report() == [{"class": "packetcount", "report": len(tcp)}]
        # The hash counter passes nothing and counts every packet once.
        assert drain(hashed) == []
        [h] = hashed.report()
        assert h["class"] == "hashcount"
        assert h["report"]["overflow"] == 0
        assert sum(t["packets"] for t in h["report"]["top"]) == len(first)
        assert sum(t["bytes"] for t in h["report"]["top"]) == sum(len(f) for f in first)
        # Filters only: nothing after them to report.
        assert plain.report() == []
