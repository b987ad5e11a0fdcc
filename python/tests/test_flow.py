"""sluice.Flow: the same reports as ``sluice flow --json``."""

from __future__ import annotations

import json

import pytest

import sluice
from conftest import SAMPLE, run_cli


def test_reports_equal_the_command(sluice_bin):
    specs = [
        f'(file,{SAMPLE}) -> (sampler,2,4) -> (BPF,"tcp") -> (packetcount,,8)',
        f'(file,{SAMPLE}) -> (BPF,"udp") -> (bytecount,,8)',
    ]
    want = json.loads(run_cli(sluice_bin, "flow", "--json", *specs))["flows"]
    group = sluice.FlowGroup()
    flows = [group.flow(s) for s in specs]
    stats = group.run()
    assert stats["packets"] > 0
    for f, w in zip(flows, want):
        r = f.report()
        assert {k: r[k] for k in ("spec", "packets", "drops")} == {k: w[k] for k in ("spec", "packets", "drops")}
        assert [(x["class"], x["instance"], x["element"], x["result"]) for x in r["filters"]] == [
            (x["class"], x["instance"], x["element"], x["result"]) for x in w["filters"]
        ]
    assert "sampler" in group.dot()


def test_a_flow_alone():
    r = sluice.Flow(f'(file,{SAMPLE}) -> (BPF,"ip") -> (packetcount,,8)').run()
    assert r["filters"][0]["result"]["packets"] == len(list(sluice.open(SAMPLE)))


def test_bad_specs_carry_their_column():
    with pytest.raises(sluice.FilterError) as e:
        sluice.Flow("(file,x.pcap) -> (BPF,tcp")
    assert e.value.column is not None
    with pytest.raises(ValueError):
        sluice.FlowGroup(preference="sideways")
    with pytest.raises(ValueError):
        sluice.FlowGroup(slots=0)
