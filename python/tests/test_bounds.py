"""Bad input from Python never takes the interpreter down (issue 36):
arrays rewritten by another thread while a batch runs without the GIL,
buffer sizes past their limits, flows naming files the policy does not
allow."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import sluice
from conftest import SAMPLE

FRAMES = 20_000
FRAME = 60


def _race(call) -> dict:
    """Run ``call(data, offsets)`` again and again while another thread
    rewrites ``offsets`` between a valid layout and one pointing far past
    the buffer. Every call must return, or raise an ordinary exception
    (a check that saw a rewritten copy): never PanicException, which is a
    BaseException and escapes ``except Exception``."""
    data = np.zeros(FRAMES * FRAME, dtype=np.uint8)
    data[12::FRAME] = 0x08  # every frame an IPv4 Ethernet frame
    good = np.arange(0, FRAMES * FRAME + 1, FRAME, dtype=np.int64)
    bad = np.full_like(good, 1 << 40)
    bad[0] = 0
    offsets = good.copy()
    stop = threading.Event()

    def rewrite():
        while not stop.is_set():
            offsets[:] = bad
            offsets[:] = good

    seen = {"ok": 0, "refused": 0}
    t = threading.Thread(target=rewrite)
    t.start()
    try:
        for _ in range(300):
            try:
                call(data, offsets)
                seen["ok"] += 1
            except ValueError:
                seen["refused"] += 1
    finally:
        stop.set()
        t.join()
    return seen


def test_offsets_rewritten_during_verdicts():
    f = sluice.Filter("ip")

    def call(data, offsets):
        v = f.verdicts(data, offsets=offsets)
        assert v.shape == (FRAMES,)

    seen = _race(call)
    assert seen["ok"] + seen["refused"] == 300


def test_offsets_rewritten_during_classify_batch():
    c = sluice.Classifier()
    c.insert("ip")
    c.insert("tcp")

    def call(data, offsets):
        frame, _ = c.classify_batch(data, offsets=offsets)
        assert len(frame) == FRAMES

    seen = _race(call)
    assert seen["ok"] + seen["refused"] == 300


def test_a_batch_rewritten_from_python_keeps_its_own_frames():
    # A Batch's numpy arrays are Python's to change; native calls index
    # the batch with the positions it was built with, so a rewrite can
    # neither point past the data nor change the verdicts.
    with sluice.open(SAMPLE) as r:
        batch = r.read_batch()
    f = sluice.Filter("tcp")
    want = f.verdicts(batch).tolist()
    frames = [batch.data[batch.offsets[i]:batch.offsets[i + 1]] for i in range(len(batch))]
    assert want == [f.matches(x) for x in frames]
    batch.offsets[:] = 1 << 40
    batch.wirelens[:] = -1
    assert f.verdicts(batch).tolist() == want
    c = sluice.Classifier()
    tcp = c.insert("tcp")
    frame, filt = c.classify_batch(batch)
    assert frame.tolist() == [i for i, v in enumerate(want) if v] and set(filt.tolist()) <= {tcp}
    # Wire lengths given beside a batch are the caller's, and checked.
    with pytest.raises(ValueError):
        f.verdicts(batch, wirelens=np.full(len(batch), -1))


def test_wire_lengths_rewritten_during_verdicts():
    f = sluice.Filter("ip")
    data = np.zeros(FRAMES * FRAME, dtype=np.uint8)
    offsets = np.arange(0, FRAMES * FRAME + 1, FRAME, dtype=np.int64)
    wirelens = np.full(FRAMES, FRAME, dtype=np.int64)
    stop = threading.Event()

    def rewrite():
        while not stop.is_set():
            wirelens[:] = -1
            wirelens[:] = FRAME

    t = threading.Thread(target=rewrite)
    t.start()
    try:
        for _ in range(300):
            try:
                f.verdicts(data, offsets=offsets, wirelens=wirelens)
            except ValueError:
                pass
    finally:
        stop.set()
        t.join()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"slots": 2**40},
        {"slots": 1_000_000},
        {"slot_bytes": 4294967295},
        {"slots": 2**24 + 1, "slot_bytes": 1},
    ],
)
def test_buffer_sizes_past_their_limits_are_refused(kwargs):
    spec = f"(file,{SAMPLE}) -> (packetcount)"
    with pytest.raises(ValueError, match="limit"):
        sluice.Flow(spec, **kwargs)
    with pytest.raises(ValueError, match="limit"):
        sluice.FlowGroup(**kwargs)


def test_a_policy_refuses_at_file_before_reading_it(tmp_path: Path):
    secret = tmp_path / "secret"
    secret.write_text("admin:$6$Xq7ZpL0w$SecretHash:19000:0:99999:7:::\n")
    policy = tmp_path / "policy"
    policy.write_text(f"allow source=file:{SAMPLE.parent} class=*\nallow read={tmp_path}/filters\n")
    policy.chmod(0o644)
    g = sluice.FlowGroup(policy=str(policy))
    with pytest.raises(ValueError) as e:
        g.flow(f'(file,{SAMPLE}) -> (BPF,"@{secret}")')
    assert "no rule allows reading" in str(e.value)
    # Allowed, the file is read; its error names the line and column and
    # quotes nothing of it.
    allowed = tmp_path / "filters"
    allowed.mkdir()
    (allowed / "f").write_text(secret.read_text())
    with pytest.raises(Exception) as e:
        g.flow(f'(file,{SAMPLE}) -> (BPF,"@{allowed}/f")')
    for word in ("Xq7ZpL0w", "SecretHash", "admin", "99999"):
        assert word not in str(e.value)
    assert "line 1, column" in str(e.value)


def test_a_policy_others_can_write_warns(tmp_path: Path):
    policy = tmp_path / "policy"
    policy.write_text("allow source=* class=*\n")
    policy.chmod(0o666)
    with pytest.warns(RuntimeWarning, match="writable by everyone"):
        sluice.FlowGroup(policy=str(policy))
