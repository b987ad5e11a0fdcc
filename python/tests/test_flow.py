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
        keys = ("spec", "packets", "delivered", "drops")
        assert {k: r[k] for k in keys} == {k: w[k] for k in keys}
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


def test_a_flow_ending_in_a_counter_counts_what_the_counter_counts(sluice_bin):
    # The report's packets are what the flow took: for a counter at its
    # end, what the counter counts (packets reaching it), never 0.
    for expr in ("tcp", "udp", "vlan", "ip and not tcp"):
        want = int(run_cli(sluice_bin, "filter", "-r", str(SAMPLE), "--count", expr))
        counted = sluice.Flow(f'(file,{SAMPLE}) -> (BPF,"{expr}") -> (packetcount,,8)').run()
        assert counted["packets"] == counted["filters"][-1]["result"] == want, expr
        assert counted["delivered"] == 0
        hashed = sluice.Flow(f'(file,{SAMPLE}) -> (BPF,"{expr}") -> (hashcount,4)').run()
        assert hashed["packets"] == want and hashed["delivered"] == 0, expr
        passed = sluice.Flow(f'(file,{SAMPLE}) -> (BPF,"{expr}")').run()
        assert passed["packets"] == passed["delivered"] == want, expr
    # Two counters in parallel at the end: every packet reaching them.
    both = sluice.Flow(f'(file,{SAMPLE}) -> (BPF,"ip") -> (packetcount) | (bytecount)').run()
    assert both["packets"] == both["filters"][2]["result"]


def test_flow_reports_as_tables():
    pd = pytest.importorskip("pandas")
    r = sluice.Flow(f'(file,{SAMPLE}) -> (BPF,"udp") -> (bytecount,,8)').run()
    df = sluice.to_pandas(r)
    assert isinstance(df, pd.DataFrame)
    assert list(df["class"]) == ["file", "BPF", "bytecount"]
    assert df["count"].iloc[2] == r["filters"][2]["result"]
    assert json.loads(df["result"].iloc[0]) == r["filters"][0]["result"]
    assert (df["packets"] == r["packets"]).all()
    group = sluice.FlowGroup()
    flows = [group.flow(f'(file,{SAMPLE}) -> (BPF,"{e}")') for e in ("tcp", "udp")]
    group.run()
    assert len(sluice.to_arrow([f.report() for f in flows])) == 4
