#!/usr/bin/env bash
# Compile time (wall and CPU: user + system) and peak memory of `host a or
# host b or ...` expressions, for sluice and for the system libpcap (libpcap
# issue 1255: libpcap's optimiser is quadratic here).
# Usage: scripts/bench-compile.sh [N...] (default 100 1000 10000 100000;
# add 1000000 for the million-term figure of docs/compile-bench.md).
# Needs a release build (cargo build --release) and, for libpcap, libpcap-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("${@:-100 1000 10000 100000}")
[ $# -gt 0 ] && sizes=("$@") || sizes=(100 1000 10000 100000)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/bpfc" ../shared/tools/bpfc.c -lpcap 2>/dev/null || true
echo "| terms | sluice wall time | sluice CPU time | sluice peak memory | sluice instructions | libpcap time | libpcap peak memory |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for n in "${sizes[@]}"; do
    python3 -c "
import sys
n=int(sys.argv[1])
print(' or '.join('host %d.%d.%d.%d' % (10, (i>>16)&255, (i>>8)&255, i&255) for i in range(1, n+1)))
" "$n" > "$work/expr"
    # Time the compile alone (the 14-packet sample is read too, printing the
    # program is not timed); the instruction count comes from a -ddd run.
    /usr/bin/time -f "%e %U %S %M" -o "$work/t" ./target/release/sluice filter -r examples/sample.pcap --count -F "$work/expr" > /dev/null
    read -r st su ss sm < "$work/t"
    sc=$(awk -v u="$su" -v s="$ss" 'BEGIN { printf "%.2f", u + s }')
    insns=$(./target/release/sluice filter -y EN10MB -F "$work/expr" -ddd | head -1)
    lt="-"; lm="-"
    # libpcap takes minutes beyond a few thousand terms; only try small sizes.
    if [ -x "$work/bpfc" ] && [ "$n" -le "${LIBPCAP_MAX:-1000}" ]; then
        if /usr/bin/time -f "%e %M" -o "$work/t2" timeout 600 "$work/bpfc" -F "$work/expr" EN10MB > /dev/null 2>&1; then
            read -r lt lm < "$work/t2"; lt="${lt} s"; lm="$((lm / 1024)) MB"
        else
            lt="failed or > 600 s"
        fi
    fi
    echo "| $n | ${st} s | ${sc} s | $((sm / 1024)) MB | $insns | $lt | $lm |"
done
