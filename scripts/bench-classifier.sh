#!/usr/bin/env bash
# The merged classifier next to the CSPF/BPF model and a hand-written
# demultiplexer, on the same TCP session filters and the same packets:
# runs `cargo bench --bench classifier` (which writes the sessions and
# packets of every N to a temporary directory), then
# ../shared/tools/handdemux.c on the same files and ../shared/tools/multibpf.c
# (libpcap's interpreter, every filter on every packet, up to 10,000
# filters, on the packets the bench's libpcap column used), and prints one
# Markdown table. Usage: scripts/bench-classifier.sh [N...]
# Needs libpcap-dev and a C compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/handdemux" ../shared/tools/handdemux.c -lpcap
cc -O2 -o "$work/multibpf" ../shared/tools/multibpf.c -lpcap
sizes="${*:-1 10 100 1000 10000 100000 1000000}"
SLUICE_BENCH_SIZES="$sizes" SLUICE_BENCH_DIR="$work" \
    CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}" \
    cargo bench --bench classifier 2>/dev/null | tee "$work/bench.txt" >&2
for n in $sizes; do
    # ns per packet: the best of 3 runs of 3 passes each.
    best=""
    for _ in 1 2 3; do
        t=$("$work/handdemux" "$work/packets-$n.pcap" "$work/sessions-$n.txt" 3 | sed -n 's/.*ns_per_packet \([0-9.]*\).*/\1/p')
        best=$(python3 -c "import sys; a=[float(x) for x in sys.argv[1:] if x]; print(min(a))" $best "$t")
    done
    echo "$n $best" >> "$work/handdemux.txt"
    if [ "$n" -le 10000 ]; then
        t=$("$work/multibpf" "$work/small-$n.pcap" "$work/sessions-$n.txt" 1 | sed -n 's/.*ns_per_packet \([0-9.]*\).*/\1/p')
        echo "$n $t" >> "$work/multibpf.txt"
    fi
done
python3 - "$work" <<'PY'
import sys, os
work = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(work, "results.tsv"))]
head, rows = rows[0], rows[1:]
def tool(name):
    path = os.path.join(work, name)
    if not os.path.exists(path):
        return {}
    return {int(a): float(b) for a, b in (l.split() for l in open(path))}
hand, multi = tool("handdemux.txt"), tool("multibpf.txt")
def ns(x):
    if x in ("-", None):
        return "-"
    x = float(x)
    if x >= 1e6: return "%.2f ms" % (x / 1e6)
    if x >= 1e4: return "%.1f µs" % (x / 1e3)
    return "%.1f ns" % x
print("| N | sluice classify | sluice batch 16 | sluice batch 32 | sluice native classify | sluice native first-match batch 64 | memory floor | handdemux.c | libpcap × N (pcap crate) | libpcap × N (multibpf.c) | libpcap / sluice batch 16 | collisions: classify | collisions: batch 16 | key-only inserts/s | table B / filter | native tables B / filter | RSS B / filter |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    d = dict(zip(head, r))
    n = int(d["n"])
    lp = d["libpcap"]
    ratio = "-" if lp == "-" else "%.0f×" % (float(lp) / float(d["batch16"]))
    ins = float(d["inserts_per_s"])
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        f"{n:,}", ns(d["classify"]), ns(d["batch16"]), ns(d["batch32"]), ns(d.get("native")), ns(d.get("native_batch")), ns(d.get("floor")), ns(hand.get(n)),
        ns(lp), ns(multi.get(n)), ratio, ns(d["collide_classify"]), ns(d["collide_batch16"]),
        "-" if n == 1 or ins != ins else "%.2f M" % (ins / 1e6),
        "%.0f" % float(d["table_bytes"]), "%.0f" % float(d["native_bytes"]), "%.0f" % float(d["rss_bytes"])))
PY
