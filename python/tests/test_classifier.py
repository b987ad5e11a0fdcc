"""sluice.Classifier: the merged filters give what each filter gives alone."""

from __future__ import annotations

import numpy as np
import pytest

import sluice
from conftest import SAMPLE


def corpus_frames(pcaps, n=60):
    frames = []
    for p in pcaps[:n]:
        try:
            with sluice.open(p) as r:
                frames += [f for _, f in r]
        except sluice.CaptureError:
            pass
    return frames


def test_classify_equals_each_filter_alone(pcaps, expressions):
    frames = corpus_frames(pcaps)
    exprs = expressions[:150]
    c = sluice.Classifier()
    ids = [c.insert(e) for e in exprs]
    alone = np.array([sluice.Filter(e).verdicts(frames) for e in exprs])  # filters x frames
    frame_idx, filter_id = c.classify_batch(frames)
    got = np.zeros_like(alone)
    pos = {fid: i for i, fid in enumerate(ids)}
    for fi, fid in zip(frame_idx, filter_id):
        got[pos[int(fid)], fi] = True
    assert (got == alone).all()
    for k in range(0, len(frames), 37):
        assert c.classify(frames[k]) == [ids[i] for i in np.flatnonzero(alone[:, k])]


def test_first_match_is_the_first_inserted_or_highest_priority(pcaps, expressions):
    frames = corpus_frames(pcaps, 30)
    exprs = expressions[:80]
    c = sluice.Classifier(first_match=True)
    ids = [c.insert(e) for e in exprs]
    alone = np.array([sluice.Filter(e).verdicts(frames) for e in exprs])
    won = c.classify_batch(frames)
    for k in range(len(frames)):
        hits = np.flatnonzero(alone[:, k])
        want = ids[hits[0]] if len(hits) else -1
        assert won[k] == want
        assert c.classify(frames[k]) == (None if want == -1 else want)
    boss = c.insert("", priority=10)  # every packet, highest priority
    assert c.classify(frames[0]) == boss


def test_insert_remove_and_filters():
    c = sluice.Classifier()
    with open(SAMPLE, "rb"):
        pass
    with sluice.open(SAMPLE) as r:
        frames = [f for _, f in r]
    tcp = c.insert(sluice.Filter("tcp"))
    ip = c.insert("ip")
    assert len(c) == 2 and c.ids() == [tcp, ip]
    before = c.classify_batch(frames)
    c.remove(ip)
    after = c.classify_batch(frames)
    assert set(after[1].tolist()) <= {tcp}
    assert len(after[0]) < len(before[0])
    with pytest.raises(KeyError):
        c.remove(ip)
    with pytest.raises(sluice.FilterError):
        c.insert("tcp prt 80")
    with pytest.raises(TypeError):
        c.insert(sluice.Filter("ip", linktype="RAW"))
    with pytest.raises(TypeError):
        c.insert(42)
    assert len(c) == 1
