"""sluice.Filter against libpcap's verdicts on the shared corpus, its
errors, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

import sluice
from conftest import SAMPLE, run_cli


def frames_of(path):
    with sluice.open(path) as r:
        return [frame for _, frame in r]


def test_verdicts_equal_libpcap_on_the_corpus(pcaps, expressions, oracle, oracle_unopt):
    # Every capture, every expression: libpcap master's verdicts (with the
    # optimiser, or without it where the two differ on truncated packets).
    batches = {}
    for p in pcaps:
        try:
            with sluice.open(p) as r:
                batches[p.name] = r.read_batch(1 << 20)
        except sluice.CaptureError:
            continue
    checked = 0
    for line, expr in enumerate(expressions, 1):
        f = sluice.Filter(expr)
        for name, batch in batches.items():
            want = oracle.get((name, line))
            if want is None:
                continue
            got = "".join("1" if v else "0" for v in f.verdicts(batch))
            if got != want[: len(got)]:
                assert got == oracle_unopt[(name, line)][: len(got)], f"{expr!r} on {name}"
            assert len(got) == len(want), f"{name}: {len(got)} packets, libpcap read {len(want)}"
            checked += 1
    assert checked > 200_000, checked


def test_one_frame_at_a_time_equals_the_batch(pcaps, expressions):
    frames = frames_of(pcaps[0]) + frames_of(SAMPLE)
    for expr in expressions[:100]:
        f = sluice.Filter(expr)
        batch = f.verdicts(frames)
        assert [f.matches(x) for x in frames] == batch.tolist(), expr
        packed = b"".join(frames)
        offsets = np.cumsum([0] + [len(x) for x in frames])
        assert f.verdicts(packed, offsets=offsets).tolist() == batch.tolist()
        assert f.verdicts(bytearray(packed), offsets=offsets.astype(np.int32)).tolist() == batch.tolist()
        assert f.verdicts(np.frombuffer(packed, np.uint8), offsets=list(offsets)).tolist() == batch.tolist()


def test_wire_lengths_count():
    f = sluice.Filter("greater 100")
    assert not f.matches(bytes(60))
    assert f.matches(bytes(60), wirelen=1500)
    assert f.verdicts([bytes(60)] * 2, wirelens=[60, 1500]).tolist() == [False, True]


def test_program_text_equals_the_command(sluice_bin):
    for expr in ["tcp port 80", "ip6 and udp", "vlan and host 10.0.0.1"]:
        for fmt in ["d", "dd", "ddd"]:
            want = run_cli(sluice_bin, "filter", f"-{fmt}", expr).rstrip("\n")
            assert sluice.Filter(expr).program(fmt) == want
    want = run_cli(sluice_bin, "filter", "-y", "LINUX_SLL", "-O", "-d", "ip").rstrip("\n")
    assert sluice.Filter("ip", linktype="LINUX_SLL", optimize=False).program() == want


def test_other_languages():
    raw = sluice.Filter("dpf: (0:8 == 0x45)", linktype="RAW", snaplen=9)
    assert raw.language == "dpf"
    assert raw.run(b"\x45") == 9
    same = sluice.Filter("(0:8 == 0x45)", linktype="RAW", language="dpf")
    assert same.matches(b"\x45") and not same.matches(b"\x60")
    bpf = sluice.Filter("bpf: 1; 6 0 0 7", snaplen=1)
    assert bpf.run(b"") == 7
    assert sluice.Filter("1; 6 0 0 7", language="bpf").run(b"") == 7


@pytest.mark.parametrize("text", ["tcp port", "tcp and and", "host 1.2.3.4.5", "udp prt 53", "ip[1:3] = 2"])
def test_errors_carry_the_commands_column(text, sluice_bin):
    import re
    import subprocess

    done = subprocess.run([str(sluice_bin), "filter", "-d", text], capture_output=True, text=True)
    assert done.returncode == 1
    column = int(re.search(r"column (\d+)", done.stderr).group(1))
    with pytest.raises(sluice.FilterError) as e:
        sluice.Filter(text)
    err = e.value
    assert isinstance(err, ValueError)
    assert err.column == column, str(err)
    assert err.text == text and err.line == 1
    assert err.message in done.stderr
    assert not err.message.startswith("column")
    lines = str(err).splitlines()
    assert lines[0] == f"column {column}: {err.message}"
    assert lines[1].strip() == text
    assert lines[2].index("^") == lines[1].index(text) + column - 1


def test_errors_in_other_languages_count_the_prefix():
    with pytest.raises(sluice.FilterError) as e:
        sluice.Filter("dpf: (12:16 == ")
    assert e.value.column == 16
    with pytest.raises(sluice.FilterError) as e:
        sluice.Filter("cspf: pushword P[6] | frob")
    assert e.value.column == 23


def test_every_expression_libpcap_refuses_is_refused(corpus):
    rows = (corpus / "expressions-reject.tsv").read_text().splitlines()
    refused = 0
    for row in rows[1:]:
        expr = row.split("\t")[0]
        with pytest.raises(sluice.FilterError) as e:
            sluice.Filter(expr)
        if e.value.column is not None:
            assert 1 <= e.value.column <= len(expr.encode()) + 1, (expr, e.value.column)
        refused += 1
    assert refused >= 390


def test_rejects_all_is_an_error():
    with pytest.raises(sluice.FilterError, match="rejects all packets"):
        sluice.Filter("ip and not ip")


@pytest.mark.parametrize(
    "call, exc",
    [
        (lambda f: f.verdicts(b"abc", offsets=[0, 5]), ValueError),
        (lambda f: f.verdicts(b"abc", offsets=[2, 1]), ValueError),
        (lambda f: f.verdicts(b"abc", offsets=[-1, 1]), ValueError),
        (lambda f: f.verdicts(b"abc", offsets=[]), ValueError),
        (lambda f: f.verdicts(b"abc"), TypeError),
        (lambda f: f.verdicts([b"a", 5]), TypeError),
        (lambda f: f.verdicts([b"a"], wirelens=[1, 2]), ValueError),
        (lambda f: f.verdicts([b"a"], wirelens=[-1]), ValueError),
        (lambda f: f.verdicts(b"ab", offsets=[[0, 1], [1, 2]]), TypeError),
        (lambda f: f.program("x"), ValueError),
        (lambda f: f.matches("text"), TypeError),
    ],
)
def test_bad_input_raises(call, exc):
    with pytest.raises(exc):
        call(sluice.Filter("ip"))


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        sluice.Filter("ip", linktype="NO_SUCH_LINK")
    with pytest.raises(ValueError):
        sluice.Filter("ip", linktype=99999)
    with pytest.raises(ValueError):
        sluice.Filter("ip", language="cobol")
    with pytest.raises(OverflowError):
        sluice.Filter("ip", snaplen=-1)


def test_empty_and_odd_batches():
    f = sluice.Filter("ip")
    assert f.verdicts([]).shape == (0,)
    assert f.verdicts(b"", offsets=[0]).shape == (0,)
    assert f.verdicts(b"\x00" * 10, offsets=[0, 0, 10]).tolist() == [False, False]
    assert f.verdicts((x for x in [bytes(14)])).tolist() == [False]
    assert f.verdicts([memoryview(bytes(14))]).tolist() == [False]


def test_the_gil_is_released_during_a_batch():
    import threading

    f = sluice.Filter("tcp port 80")
    frames = frames_of(SAMPLE) * 20000
    counts = []
    threads = [threading.Thread(target=lambda: counts.append(int(f.verdicts(frames).sum()))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(counts)) == 1 and len(counts) == 4
