#!/usr/bin/env bash
# The benchmark of issue 22: many different filters at once, the default
# merged engine (sluice_native::NativeAuto) side by side with tuple space
# search and the baselines (sluice's native code and libpcap's bpf_filter,
# every filter on every packet), in one run:
#   corpus     every Ethernet packet of ../shared/conformance/pcaps as one
#              capture, the first N = 10, 30, 100, 300, 600 corpus expressions
#   generated  sluice_workload::filter_set(N, 1) over traffic(N, 1, P),
#              N = 10, 100, 1,000, 10,000, 100,000 (baselines up to 10,000)
#   updates    structural and key-only inserts into an AutoClassifier holding
#              10,000 generated filters
# and writes the Markdown tables (stdout), one TSV, a page and a plot.
#
# Why a bench binary (benches/merging/, harness = false) and not `sluice
# bench`: the figures need the engines' insides (which structure NativeAuto
# chose, its statistics and build phases, AutoClassifier's updates,
# per-filter checks against libpcap's known deviations), filter sets made
# in memory by sluice_workload (100,000 filters), and RSS measured around a
# build in a process of its own; `sluice bench --filters` stays the user's
# tool for one capture and one filters file.
#
# Each section and N runs in a process of its own (RSS growth is then the
# build's alone), one after another; every engine of an N is timed in that
# process, on the same packets. A disagreement between engines on the
# matches stops the run (libpcap's known deviations from libpcap master on
# the corpus, from the shared oracle, are allowed and counted).
#
# Usage: scripts/bench-merging.sh [corpus[=N,...]] [generated[=N,...]] [updates]
#   no argument: all three sections at the issue's sizes.
#   QUICK=1: 0.25 s per engine, 16,384 generated packets, 20 structural
#            inserts (about 70 s in all, for development); the output goes
#            to target/merging-bench/ instead of docs/ (OUT=DIR to choose).
# Output: OUT/merging-bench.md, OUT/merging-bench.tsv, OUT/merging-scaling.svg
# (OUT = docs for a full run: 3 s per engine, 131,072 generated packets,
# 50 structural inserts; about 6 minutes on 2 cores, not counting the
# build). Needs libpcap (libpcap0.8) and python3; builds with -j 2.
set -euo pipefail
cd "$(dirname "$0")/.."
quick="${QUICK:-}"
[ "$quick" = 0 ] && quick=""
if [ -n "$quick" ]; then
    out="${OUT:-target/merging-bench}"
    export SLUICE_MERGING_QUICK=1
else
    out="${OUT:-docs}"
    unset SLUICE_MERGING_QUICK
fi
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SLUICE_MERGING_OUT="$work"
export SLUICE_SHARED="${SLUICE_SHARED:-../shared}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"

cargo bench --bench merging --no-run -j 2 2>"$work/build.log" || {
    cat "$work/build.log" >&2
    exit 1
}
bin=$(sed -n 's/.*Executable .*(\(.*merging-[0-9a-f]*\)).*/\1/p' "$work/build.log" | tail -1)
[ -x "$bin" ] || { echo "bench-merging: no bench executable found" >&2; exit 1; }

sections=("$@")
[ ${#sections[@]} -gt 0 ] || sections=(corpus generated updates)
started=$(date +%s)
for s in "${sections[@]}"; do
    name="${s%%=*}"
    case "$s" in
        corpus=*|generated=*) sizes="${s#*=}" ;;
        corpus) sizes="10,30,100,300,600" ;;
        generated) sizes="10,100,1000,10000,100000" ;;
        updates) sizes="" ;;
        *) echo "bench-merging: unknown section $s" >&2; exit 2 ;;
    esac
    if [ -z "$sizes" ]; then
        "$bin" "$name"
    else
        for n in ${sizes//,/ }; do
            "$bin" "$name=$n"
        done
    fi
done
echo "bench-merging: measured in $(( $(date +%s) - started )) s" >&2

report=(python3 scripts/merging-report.py "$work" --tsv "$out/merging-bench.tsv" --md "$out/merging-bench.md")
[ -n "$quick" ] && report+=(--quick)
"${report[@]}"
python3 scripts/plot-merging.py "$out/merging-bench.tsv" "$out/merging-scaling.svg"
echo "bench-merging: wrote $out/merging-bench.md, $out/merging-bench.tsv, $out/merging-scaling.svg" >&2
