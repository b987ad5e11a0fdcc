"""sluice.open against dpkt's readers on every corpus capture, pcap and
pcapng; batches, Arrow, and bad files."""

from __future__ import annotations

import dpkt
import pytest

import sluice
from conftest import SAMPLE


def dpkt_packets(path):
    """dpkt's (ts, frame) pairs, up to the end or its first error."""
    out = []
    with open(path, "rb") as f:
        try:
            head = f.read(4)
            f.seek(0)
            if head == b"\x0a\x0d\x0d\x0a":
                reader = dpkt.pcapng.Reader(f)
            else:
                reader = dpkt.pcap.Reader(f)
            for ts, buf in reader:
                out.append((ts, bytes(buf)))
        except Exception as e:  # dpkt's errors are of many kinds
            return out, e
    return out, None


def sluice_packets(path):
    out = []
    try:
        with sluice.open(path) as r:
            for ts, frame in r:
                out.append((ts, frame))
    except sluice.CaptureError as e:
        return out, e
    return out, None


def test_the_iterator_equals_dpkts_on_the_corpus(pcaps):
    compared = {"pcap": 0, "pcapng": 0}
    for p in pcaps:
        want, dpkt_error = dpkt_packets(p)
        got, error = sluice_packets(p)
        if dpkt_error is None and error is None:
            assert len(got) == len(want), p.name
            snaplen = sluice.open(p).snaplen
            for i, ((ts, frame), (wts, wframe)) in enumerate(zip(got, want)):
                if frame != wframe:
                    # A record longer than the file's snapshot length:
                    # libpcap (so sluice) cuts it to that length, dpkt
                    # does not.
                    assert len(frame) == snaplen < len(wframe), f"{p.name} packet {i}"
                    assert frame == wframe[:snaplen], f"{p.name} packet {i}"
                assert ts == pytest.approx(wts, abs=1e-6), f"{p.name} packet {i}"
            compared["pcapng" if p.suffix == ".pcapng" else "pcap"] += 1
        else:
            # A malformed capture: every packet both read before the
            # first problem is the same.
            n = min(len(got), len(want))
            assert [f for _, f in got[:n]] == [f for _, f in want[:n]], p.name
    assert compared["pcap"] > 300 and compared["pcapng"] > 10, compared


def test_time_stamps_are_exact_for_pcap():
    want, _ = dpkt_packets(SAMPLE)
    got, _ = sluice_packets(SAMPLE)
    assert [t for t, _ in got] == [t for t, _ in want]


def test_batches_hold_the_same_packets(pcaps):
    for p in pcaps[:40] + [SAMPLE]:
        got, error = sluice_packets(p)
        if error:
            continue
        with sluice.open(p) as r:
            frames = []
            stamps = []
            while True:
                b = r.read_batch(7)
                if len(b) == 0:
                    break
                offsets = b.offsets.tolist()
                frames += [b.data[offsets[i] : offsets[i + 1]] for i in range(len(b))]
                stamps += (b.timestamps_ns / 1e9).tolist()
        assert frames == [f for _, f in got], p.name
        assert stamps == pytest.approx([t for t, _ in got], abs=1e-6)


def test_a_batch_as_arrow_and_pandas():
    pa = pytest.importorskip("pyarrow")
    with sluice.open(SAMPLE) as r:
        b = r.read_batch()
    t = sluice.to_arrow(b)
    assert t.num_rows == len(b)
    assert t.column("frame").type == pa.large_binary()
    got, _ = sluice_packets(SAMPLE)
    assert t.column("frame").to_pylist() == [f for _, f in got]
    df = sluice.to_pandas(b)
    assert list(df.columns) == ["timestamp", "wirelen", "linktype", "frame"]
    assert (df["linktype"] == 1).all()


def test_reader_attributes():
    with sluice.open(SAMPLE) as r:
        assert r.linktype == r.datalink() == 1
        assert r.format == "pcap" and r.snaplen > 0
    with pytest.raises(ValueError):
        next(iter(r))


def test_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        sluice.open(tmp_path / "missing.pcap")
    with pytest.raises(IsADirectoryError):
        sluice.open(tmp_path)
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"this is not a capture file at all")
    with pytest.raises(sluice.CaptureError) as e:
        sluice.open(junk)
    assert e.value.offset == 0 and e.value.path == str(junk)
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    with pytest.raises(sluice.CaptureError):
        sluice.open(empty)
    # Truncated: every whole packet first, then the error.
    data = SAMPLE.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:-7])
    got = []
    with pytest.raises(sluice.CaptureError) as e:
        for ts, frame in sluice.open(cut):
            got.append(frame)
    assert len(got) == len(sluice_packets(SAMPLE)[0]) - 1
    assert "truncated" in e.value.message or "ends inside" in e.value.message
    # The same through batches: the packets, then the error.
    r = sluice.open(cut)
    assert len(r.read_batch()) == len(got)
    with pytest.raises(sluice.CaptureError):
        r.read_batch()
