#!/usr/bin/env bash
# The Python module's benchmark (issue 20): Filter.verdicts against the Rust
# command's per-packet cost, dpkt + libpcap and scapy on the same traffic;
# sluice.dask.split_counts on 1 and 2 workers over GB of generated session
# traffic at 1,000 and 100,000 filters. See scripts/bench-python.py.
#
# Usage: scripts/bench-python.sh [--gb 2] [--quick] [--sections filter,split,scaling]
#   Builds the release command, the workload generator and the module (into
#   target/python-venv, with scapy beside the test packages), generates the
#   traffic under target/python-bench/ (kept for the next run: 2 GB per
#   filter set) and prints the Markdown tables; the figures go to
#   target/python-bench/result.json. A full run takes about 15 minutes on 2
#   cores, most of it generating traffic the first time. Needs libpcap.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
pyvenv="$target/python-venv"
work="$target/python-bench"
cargo build --release -q -j 2 --bin sluice
cargo build --release -q -j 2 -p sluice-workload --example gen
if ! "$pyvenv/bin/python" -c 'import maturin, numpy, dpkt, distributed, scapy' >/dev/null 2>&1; then
    [ -x "$pyvenv/bin/python" ] || /usr/bin/python3 -m venv "$pyvenv"
    "$pyvenv/bin/python" -m pip install -q -r python/requirements-test.txt scapy
fi
VIRTUAL_ENV="$pyvenv" PATH="$pyvenv/bin:$PATH" maturin develop --release -q -m python/Cargo.toml
mkdir -p "$work"
exec "$pyvenv/bin/python" scripts/bench-python.py --work "$work" --sluice "$target/release/sluice" \
    --gen "$target/release/examples/gen" --json "$work/result.json" "$@"
