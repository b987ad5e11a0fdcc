"""What the command reads, the module reads: gzip and zstd captures in
``sluice.open`` and ``sluice.split``, file objects, ``file://`` URLs;
``split`` with fragment dispatch and MPF, counted as ``sluice split``
counts."""

from __future__ import annotations

import gzip
import io
import json
import os
import struct
from pathlib import Path

import pytest

import sluice
from conftest import REPO, SAMPLE, run_cli


def packets(r):
    return [(ts, frame) for ts, frame in r]


def compressed(tmp_path: Path, src: Path, kind: str, sluice_bin: Path) -> Path:
    raw = src.read_bytes()
    out = tmp_path / f"{src.name}.{kind}"
    if kind == "gz":
        out.write_bytes(gzip.compress(raw))
    else:
        import subprocess

        done = subprocess.run(["zstd", "-q", "-c", str(src)], capture_output=True)
        assert done.returncode == 0, done.stderr
        out.write_bytes(done.stdout)
    return out


@pytest.mark.parametrize("kind", ["gz", "zst"])
def test_compressed_captures_read_as_the_command_reads_them(tmp_path, sluice_bin, pcaps, kind):
    for src in [SAMPLE] + [p for p in pcaps if p.suffix in (".pcap", ".pcapng")][:15]:
        try:
            with sluice.open(src) as r:
                want = packets(r)
        except sluice.CaptureError:
            continue
        z = compressed(tmp_path, src, kind, sluice_bin)
        with sluice.open(z) as r:
            assert packets(r) == want, src.name
        filters = {"tcp": "tcp", "udp": "udp", "all": ""}
        (tmp_path / "f.txt").write_text("".join(f"{n}\t{e}\n" for n, e in filters.items()))
        cli = run_cli(sluice_bin, "split", "-r", str(z), "--filters", str(tmp_path / "f.txt"), "--count")
        want_counts = {l.split("\t")[0]: int(l.split("\t")[1]) for l in cli.splitlines()}
        assert sluice.split(z, filters, count=True) == want_counts, src.name


def test_xz_and_bzip2_are_refused_with_what_to_do(tmp_path):
    xz = tmp_path / "c.pcap.xz"
    xz.write_bytes(b"\xfd7zXZ\x00" + bytes(30))
    with pytest.raises(sluice.CaptureError, match="compressed with xz: decompress it first"):
        sluice.open(xz)
    bz = tmp_path / "c.pcap.bz2"
    bz.write_bytes(b"BZh91AY&SY" + bytes(30))
    with pytest.raises(sluice.CaptureError, match="bzip2"):
        sluice.split(bz, {"a": ""}, count=True)


def test_file_objects_and_file_urls(tmp_path):
    want = packets(sluice.open(SAMPLE))
    assert packets(sluice.open(io.BytesIO(SAMPLE.read_bytes()))) == want
    assert packets(sluice.open(io.BytesIO(gzip.compress(SAMPLE.read_bytes())))) == want
    assert packets(sluice.open(f"file://{SAMPLE}")) == want
    with open(SAMPLE, "rb") as f:
        assert sluice.split(f, {"all": ""}, count=True) == {"all": len(want)}
    rel = os.path.relpath(SAMPLE)
    assert sluice.split(rel, {"all": ""}, count=True) == {"all": len(want)}
    with pytest.raises(sluice.CaptureError) as e:
        sluice.open(io.BytesIO(b"not a capture at all"), name="memory")
    assert e.value.path == "memory"
    with pytest.raises(FileNotFoundError):
        sluice.open(f"file://{tmp_path}/missing.pcap")


def fragmented_capture(path: Path) -> Path:
    """UDP datagrams to port 53 and 80 in IPv4 fragments, some of them
    with the later fragments first, with unfragmented packets between."""
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    t = 0

    def put(ip: bytes) -> None:
        nonlocal t
        frame = b"\x02" + bytes(5) + b"\x02" + bytes(5) + b"\x08\x00" + ip
        out.extend(struct.pack("<IIII", 1_700_000_000, t, len(frame), len(frame)) + frame)
        t += 1000

    for i in range(60):
        port = 53 if i % 2 else 80
        payload = struct.pack(">HHHH", 4000 + i, port, 8 + 600, 0) + bytes([i]) * 600
        chunks = [payload[0:208], payload[208:416], payload[416:]]
        frags = []
        for k, c in enumerate(chunks):
            more = 0x2000 if k < 2 else 0
            off = (k * 208) // 8
            hdr = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(c), 1000 + i, more | off, 64, 17, 0,
                              bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
            frags.append(hdr + c)
        order = [2, 1, 0] if i % 3 == 0 else [0, 1, 2]
        for k in order:
            put(frags[k])
        plain = struct.pack(">HHHH", 5000, port, 8 + 10, 0) + bytes(10)
        put(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(plain), 9, 0, 64, 17, 0,
                        bytes([10, 0, 0, 3]), bytes([10, 0, 0, 4])) + plain)
    path.write_bytes(bytes(out))
    return path


def cli_json(sluice_bin, tmp_path, capture, filters, *flags):
    """`sluice split --count --json`, its filters as a `counts` dict."""
    (tmp_path / "f.txt").write_text("".join(f"{n}\t{e}\n" for n, e in filters.items()))
    got = json.loads(run_cli(sluice_bin, "split", "-r", str(capture), "--filters",
                             str(tmp_path / "f.txt"), "--count", "--json", *flags))
    got["counts"] = {f["name"]: f["accepted"] for f in got.pop("filters")}
    return got


@pytest.mark.parametrize("first_match", [False, True])
def test_split_with_fragments_counts_as_the_command(tmp_path, sluice_bin, first_match):
    cap = fragmented_capture(tmp_path / "frag.pcap")
    filters = {"dns": "udp port 53", "web": "udp port 80", "frags": "ip[6:2] & 0x3fff != 0", "all": ""}
    flags = ["--fragments"] + (["--first-match"] if first_match else [])
    want = cli_json(sluice_bin, tmp_path, cap, filters, *flags)
    got = sluice.split(cap, filters, first_match=first_match, fragments=True, stats=True)
    assert got["packets"] == want["packets"]
    assert got["counts"] == want["counts"]
    plain = sluice.split(cap, filters, first_match=first_match, count=True)
    assert got["counts"]["dns"] > plain["dns"]
    for k, v in want["fragments"].items():
        assert got["fragments"][k] == v, k
    # Written files hold what was counted.
    out = tmp_path / "out"
    sluice.split(cap, filters, out, fragments={"hold_packets": 8, "hold_timeout": 1.0},
                 first_match=first_match)
    for name in filters:
        assert len(packets(sluice.open(out / f"{name}.pcap"))) == sluice.split(
            cap, filters, first_match=first_match, fragments={"hold_packets": 8, "hold_timeout": 1.0},
            count=True)[name]


@pytest.mark.parametrize("capture", ["frag", "mptcp"])
def test_split_with_mpf_counts_as_the_command(tmp_path, sluice_bin, capture):
    cap = fragmented_capture(tmp_path / "frag.pcap") if capture == "frag" else REPO / "examples" / "mptcp-v0.pcap"
    ex = REPO / "examples"
    filters = {
        "v4": "bpf:4; 40 0 0 12; 21 0 1 2048; 6 0 0 65535; 6 0 0 0",
        "udp": "bpf:4; 48 0 0 23; 21 0 1 17; 6 0 0 65535; 6 0 0 0",
        "tcp": "bpf:4; 48 0 0 23; 21 0 1 6; 6 0 0 65535; 6 0 0 0",
        "fig3": f"bpf:@{ex}/mpf-figure3.bpf",
        "appb": f"bpf:@{ex}/mpf-appendix-b.bpf",
    }
    want = cli_json(sluice_bin, tmp_path, cap, filters, "--mpf")
    got = sluice.split(cap, filters, mpf=True, stats=True)
    assert got["packets"] == want["packets"]
    assert got["counts"] == want["counts"]
    assert got["counts"]["tcp"] + got["counts"]["udp"] > 0
    if capture == "mptcp":
        assert got["counts"]["fig3"] > 0 and got["counts"]["appb"] > 0
    out = tmp_path / "out"
    sluice.split(cap, filters, out, mpf={"pending": 64})
    for name, n in sluice.split(cap, filters, mpf={"pending": 64}, count=True).items():
        assert len(packets(sluice.open(out / f"{name}.pcap"))) == n
    with pytest.raises(sluice.FilterError, match="MPF takes bpf: programs, not pcap"):
        sluice.split(cap, {"bad": "tcp"}, mpf=True, count=True)
    with pytest.raises(ValueError):
        sluice.split(cap, filters, mpf=True, first_match=True, count=True)
