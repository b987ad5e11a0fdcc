#!/usr/bin/env bash
# Whole-file filtering: `sluice filter -r FILE -w /dev/null EXPR` next to
# `tcpdump -r FILE -w /dev/null EXPR` on the same large capture.
# Usage: scripts/bench-file.sh [MEGABYTES]   (default 512)
# The capture is built from the Ethernet packets of ../shared/conformance/pcaps,
# repeated. Needs a release build and tcpdump.
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-512}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$mb" "$work/big.pcap" <<'PY'
import glob, struct, sys
target = int(sys.argv[1]) << 20
pkts = []
for f in sorted(glob.glob('../shared/conformance/pcaps/*.pcap')):
    d = open(f, 'rb').read()
    if len(d) < 24 or d[:4] != b'\xd4\xc3\xb2\xa1' or struct.unpack('<I', d[20:24])[0] != 1:
        continue
    off = 24
    while off + 16 <= len(d):
        _, _, incl, orig = struct.unpack('<IIII', d[off:off + 16])
        if off + 16 + incl > len(d):
            break
        pkts.append(struct.pack('<IIII', 0, 0, incl, orig) + d[off + 16:off + 16 + incl])
        off += 16 + incl
with open(sys.argv[2], 'wb') as out:
    out.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1))
    n = 24
    while n < target:
        for p in pkts:
            out.write(p)
            n += len(p)
PY
size=$(stat -c %s "$work/big.pcap")
count=$(./target/release/sluice filter -r "$work/big.pcap" --count '')
echo "capture: $((size >> 20)) MB, $count packets"
echo
echo "| expression | sluice | tcpdump | tcpdump / sluice |"
echo "| --- | --- | --- | --- |"
for e in 'tcp' 'tcp port 80' 'host 192.168.1.1 or host 10.0.0.1' 'vlan and udp' 'ip6 and not icmp6'; do
    cat "$work/big.pcap" > /dev/null
    /usr/bin/time -f "%e" -o "$work/ts" ./target/release/sluice filter -r "$work/big.pcap" -w /dev/null "$e"
    /usr/bin/time -f "%e" -o "$work/tt" tcpdump -r "$work/big.pcap" -w /dev/null "$e" 2>/dev/null
    s=$(tail -1 "$work/ts")
    t=$(tail -1 "$work/tt")
    ratio=$(python3 -c "print(f'{$t/$s:.2f}×' if $s > 0 else '-')")
    echo "| \`$e\` | ${s} s | ${t} s | $ratio |"
done
