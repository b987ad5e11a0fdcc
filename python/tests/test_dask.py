"""sluice.dask on a LocalCluster of 2 workers: the same counts and output
files as one ``sluice split`` run per file, and byte ranges that lose and
duplicate no packet."""

from __future__ import annotations

import json
import struct

import dpkt
import pytest

import sluice
import sluice.dask
from conftest import SAMPLE, run_cli

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def numbered_pcap(path, n, payload=lambda i: b""):
    """A pcap of n Ethernet/IPv4/UDP frames, frame i carrying i as a
    4-byte number (and `payload(i)` after it); sizes vary."""
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for i in range(n):
        body = struct.pack(">I", i) + payload(i) + bytes((i * 7919) % 1400)
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + 8 + len(body), i & 0xFFFF, 0, 64, 17, 0,
                         bytes([10, 0, 0, i % 7]), bytes([10, 0, 1, 1]))
        udp = struct.pack(">HHHH", 1000 + i % 5, 53 if i % 3 == 0 else 80, 8 + len(body), 0)
        frame = bytes(6) + bytes([0, 1, 2, 3, 4, 5]) + b"\x08\x00" + ip + udp + body
        out += struct.pack("<IIII", 1_700_000_000 + i // 100, (i * 37) % 1_000_000, len(frame), len(frame))
        out += frame
    path.write_bytes(bytes(out))
    return path


def as_pcapng(src, dst):
    with open(dst, "wb") as f:
        w = dpkt.pcapng.Writer(f, snaplen=65535, linktype=1)
        for ts, frame in sluice.open(src):
            w.writepkt(frame, ts=ts)
    return dst


FILTERS = {
    "dns": "udp dst port 53",
    "web": "udp dst port 80",
    "host3": "src host 10.0.0.3",
    "big": "greater 1000",
    "all": "",
}


def cli_counts(sluice_bin, tmp_path, files, flags=()):
    (tmp_path / "filters.txt").write_text("".join(f"{n}\t{e}\n" for n, e in FILTERS.items()))
    total = dict.fromkeys(FILTERS, 0)
    for f in files:
        text = run_cli(sluice_bin, "split", "-r", str(f), "--filters", str(tmp_path / "filters.txt"), "--count", *flags)
        for line in text.splitlines():
            name, c = line.split("\t")
            total[name] += int(c)
    return total


def test_counts_equal_the_command(client, tmp_path, sluice_bin, pcaps):
    big = numbered_pcap(tmp_path / "big.pcap", 3000)
    files = [big, as_pcapng(big, tmp_path / "big.pcapng"), SAMPLE] + pcaps[:20]
    want = cli_counts(sluice_bin, tmp_path, files)
    got = sluice.dask.split_counts(files, FILTERS, client=client, range_bytes=100_000)
    assert got == want
    first = sluice.dask.split_counts(files, FILTERS, client=client, first_match=True, range_bytes=100_000)
    assert first == cli_counts(sluice_bin, tmp_path, files, ["--first-match"])


def packets(path):
    with sluice.open(path) as r:
        return [(ts, frame) for ts, frame in r]


@pytest.mark.parametrize("ext", ["pcap", "pcapng"])
def test_files_equal_one_split_run(client, tmp_path, sluice_bin, ext):
    src = numbered_pcap(tmp_path / "in.pcap", 4000)
    if ext == "pcapng":
        src = as_pcapng(src, tmp_path / "in.pcapng")
    (tmp_path / "filters.txt").write_text("".join(f"{n}\t{e}\n" for n, e in FILTERS.items()))
    cli_dir = tmp_path / "cli"
    run_cli(sluice_bin, "split", "-r", str(src), "--filters", str(tmp_path / "filters.txt"), "--out-dir", str(cli_dir))
    out = tmp_path / "dask"
    manifest = sluice.dask.split([src], FILTERS, out, client=client, range_bytes=150_000)
    assert len(manifest["inputs"][0]["ranges"]) > 10
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk["filters"] == manifest["filters"]
    for entry in manifest["filters"]:
        name = entry["name"]
        single = cli_dir / f"{name}.{ext}"
        shards = sluice.dask.shards(out, name)
        joined = [p for s in shards for p in packets(s)]
        assert joined == packets(single), name
        assert entry["packets"] == len(joined) == manifest["counts"][name]
        if ext == "pcap":
            # The shards' records, joined under one header, are the file.
            whole = single.read_bytes()
            assert whole[:24] + b"".join(open(s, "rb").read()[24:] for s in shards) == whole


def test_shards_at_range_boundaries_lose_and_duplicate_nothing(client, tmp_path):
    # Tiny ranges, and payloads that hold pcap records themselves (the
    # first bytes of the capture), so that some ranges guess their first
    # record wrong and are read again from the exact place.
    head = numbered_pcap(tmp_path / "head.pcap", 30).read_bytes()[24:2000]
    src = numbered_pcap(tmp_path / "tricky.pcap", 2500, payload=lambda i: head if i % 2 else b"")
    out = tmp_path / "out"
    m = sluice.dask.split([src], {"all": ""}, out, client=client, range_bytes=20_000)
    assert len(m["inputs"][0]["ranges"]) > 100
    numbers = [struct.unpack(">I", frame[42:46])[0] for s in sluice.dask.shards(out, "all") for _, frame in packets(s)]
    assert numbers == list(range(2500))
    assert m["counts"] == {"all": 2500}


def test_errors_reach_the_caller(client, tmp_path):
    with pytest.raises(sluice.FilterError):
        sluice.dask.split_counts([SAMPLE], {"bad": "tcp prt 1"}, client=client)
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(numbered_pcap(tmp_path / "whole.pcap", 500).read_bytes()[:-9])
    with pytest.raises(sluice.CaptureError):
        sluice.dask.split_counts([cut], {"all": ""}, client=client, range_bytes=50_000)
    with pytest.raises(FileNotFoundError):
        sluice.dask.split_counts([tmp_path / "missing.pcap"], {"all": ""}, client=client)


def test_without_a_client_threads_run_the_ranges(tmp_path):
    src = numbered_pcap(tmp_path / "t.pcap", 1000)
    got = sluice.dask._run([src], FILTERS, None, None, {"first_match": False}, 30_000, False)["counts"]
    assert got == sluice.split(src, FILTERS, count=True)


def test_prepare_compiles_on_every_worker(client, tmp_path):
    src = numbered_pcap(tmp_path / "p.pcap", 300)
    sluice.dask.prepare(FILTERS, client)
    digest = sluice.dask._digest(list(FILTERS.items()), {"first_match": False})
    kept = client.run(lambda: [k[0] for k in sluice.dask._SETS])
    assert len(kept) == 2 and all(digest in v for v in kept.values())
    assert sluice.dask.split_counts([src], FILTERS, client=client) == sluice.split(src, FILTERS, count=True)
    with pytest.raises(sluice.FilterError):
        sluice.dask.prepare({"bad": "tcp prt 1"}, client)


def test_the_set_is_compiled_once_and_shipped(client, tmp_path):
    src = numbered_pcap(tmp_path / "s.pcap", 2000)
    filters = {f"port{p}": f"udp dst port {p}" for p in (53, 80, 81, 443)}
    filters["host3"] = "src host 10.0.0.3"
    sluice.dask.prepare(filters, client)
    digest = sluice.dask._digest(list(filters.items()), {"first_match": False})

    def loaded():
        return [s.loaded for (d, _), s in sluice.dask._SETS.items() if d == digest]

    # Every worker loaded the client's compiled set: none compiled it.
    assert all(v == [["EN10MB"]] for v in client.run(loaded).values())
    got = sluice.dask.split_counts([src], filters, client=client, range_bytes=40_000)
    assert got == sluice.split(src, filters, count=True)
    # Without shipping each worker compiles (and counts the same).
    assert sluice.dask.split_counts([src], filters, client=client, ship=False, first_match=True) == \
        sluice.split(src, filters, first_match=True, count=True)
    # Shipped bytes load only into the set they were made from.
    blob = sluice.FilterSet(filters).export()
    with pytest.raises(ValueError, match="other filters"):
        sluice.FilterSet({"x": "tcp"}).load(blob)
    with pytest.raises(ValueError):
        sluice.FilterSet(filters).load(blob[:-3])


def test_inputs_as_relative_paths_urls_and_compressed_files(client, tmp_path, sluice_bin, monkeypatch):
    import gzip

    src = numbered_pcap(tmp_path / "rel.pcap", 2000)
    (tmp_path / "rel.pcap.gz").write_bytes(gzip.compress(src.read_bytes()))
    want = sluice.split(src, FILTERS, count=True)
    # The workers run elsewhere: a relative path is made absolute here.
    monkeypatch.chdir(tmp_path)
    got = sluice.dask.split_counts(["rel.pcap"], FILTERS, client=client, range_bytes=100_000)
    assert got == want
    got = sluice.dask.split_counts([f"file://{src}", "rel.pcap.gz"], FILTERS, client=client, range_bytes=100_000)
    assert got == {k: 2 * v for k, v in want.items()}
    m = sluice.dask.split(["rel.pcap.gz"], FILTERS, tmp_path / "out", client=client, range_bytes=100_000)
    assert m["inputs"][0]["compressed"] == "gzip" and len(m["inputs"][0]["ranges"]) == 1


def test_errors_name_the_worker_and_the_input(client, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as e:
        sluice.dask.split_counts(["missing.pcap"], {"all": ""}, client=client)
    text = str(e.value)
    assert "worker tcp://" in text and str(tmp_path / "missing.pcap") in text
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(numbered_pcap(tmp_path / "whole.pcap", 500).read_bytes()[:-9])
    with pytest.raises(sluice.CaptureError) as e:
        sluice.dask.split_counts([cut], {"all": ""}, client=client, range_bytes=50_000)
    assert "worker tcp://" in str(e.value) and str(cut) in str(e.value)


def test_fragments_and_mpf_on_the_cluster(client, tmp_path):
    from test_inputs import fragmented_capture

    cap = fragmented_capture(tmp_path / "frag.pcap")
    filters = {"dns": "udp port 53", "web": "udp port 80", "all": ""}
    want = sluice.split(cap, filters, fragments=True, count=True)
    got = sluice.dask.split_counts([cap, cap], filters, client=client, fragments=True, range_bytes=1000)
    assert got == {k: 2 * v for k, v in want.items()}
    progs = {"udp": "bpf:4; 48 0 0 23; 21 0 1 17; 6 0 0 65535; 6 0 0 0"}
    assert sluice.dask.split_counts([cap], progs, client=client, mpf=True) == sluice.split(
        cap, progs, mpf=True, count=True)


def test_parquet_datasets_beside_the_shards(client, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    src = numbered_pcap(tmp_path / "p.pcap", 3000)
    out = tmp_path / "out"
    filters = dict(FILTERS, none="udp port 7")
    m = sluice.dask.split([src], filters, out, client=client, range_bytes=60_000, format="parquet")
    assert len(m["inputs"][0]["ranges"]) > 5
    for entry in m["filters"]:
        table = pq.read_table(out / f"{entry['name']}.parquet")
        assert table.num_rows == entry["packets"] == m["counts"][entry["name"]]
        frames = [p for s in sluice.dask.shards(out, entry["name"]) for _, p in packets(s)]
        assert table.column("frame").to_pylist() == frames
        assert table.column_names == ["timestamp", "wirelen", "linktype", "frame"]
    with pytest.raises(ValueError):
        sluice.dask.split([src], filters, out, client=client, format="csv")


def test_a_worker_without_sluice_is_named_at_once(tmp_path):
    """A scheduler and a worker of their own, the worker's `import sluice`
    failing (a module of that name that raises, first on its path)."""
    import os
    import subprocess
    import sys
    import time

    shadow = tmp_path / "shadow" / "sluice"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'sluice'\", name='sluice')\n")
    sched_file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", "0", "--no-dashboard", "--scheduler-file", str(sched_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)]
    try:
        t0 = time.monotonic()
        while not sched_file.exists():
            assert time.monotonic() - t0 < 30, "no scheduler"
            time.sleep(0.1)
        env = dict(os.environ, PYTHONPATH=str(shadow.parent))
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                                       str(sched_file), "--nthreads", "1", "--no-dashboard"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path, env=env))
        with distributed.Client(scheduler_file=str(sched_file)) as c:
            c.wait_for_workers(1, timeout=30)
            t0 = time.monotonic()
            with pytest.raises(sluice.dask.WorkerError, match="cannot import sluice") as e:
                sluice.dask.split_counts([SAMPLE], {"all": ""}, client=c)
            assert time.monotonic() - t0 < 60
            assert "tcp://127.0.0.1:" in str(e.value)
    finally:
        for p in reversed(procs):
            p.kill()
            p.wait()


def test_a_cluster_that_loses_every_worker_ends_the_run(tmp_path):
    import threading
    import time

    src = numbered_pcap(tmp_path / "slow.pcap", 20_000)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        # Many small ranges keep the worker busy; then it goes away.
        threading.Timer(1.0, lambda: c.sync(cluster.scale, 0)).start()
        t0 = time.monotonic()
        with pytest.raises(sluice.dask.WorkerError, match="no worker for 5 s") as e:
            sluice.dask.split_counts([src] * 20, {"all": ""}, client=c, range_bytes=20_000, worker_timeout=5)
        assert time.monotonic() - t0 < 60, e.value
