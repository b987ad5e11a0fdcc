#!/usr/bin/env bash
# Installs sluice's libpcap (a release build) as
# PREFIX/lib/sluice/libpcap.so.0.8 (and .so.1), where `sluice exec` finds
# it. With --system, the dynamic linker is also told to prefer it for
# every program (/etc/ld.so.conf.d/00-sluice.conf, then ldconfig); with
# --uninstall, both are undone and the system's libpcap is back.
#   scripts/install-libpcap.sh [--prefix /usr/local] [--system] [--uninstall]
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=/usr/local system=0 uninstall=0
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="$2"; shift 2 ;;
        --system) system=1; shift ;;
        --uninstall) uninstall=1; shift ;;
        *) echo "usage: $0 [--prefix DIR] [--system] [--uninstall]" >&2; exit 2 ;;
    esac
done
dir="$prefix/lib/sluice"
conf=/etc/ld.so.conf.d/00-sluice.conf
if [ "$uninstall" = 1 ]; then
    rm -f "$conf" "$dir/libpcap.so.0.8" "$dir/libpcap.so.1"
    rmdir "$dir" 2>/dev/null || true
    command -v ldconfig >/dev/null && ldconfig
    echo "removed sluice's libpcap; programs load the system's again"
    exit 0
fi
cargo build --release --locked -p sluice-libpcap-abi
install -D -m 0755 target/release/libpcap.so "$dir/libpcap.so.0.8"
ln -sf libpcap.so.0.8 "$dir/libpcap.so.1"
echo "installed $dir/libpcap.so.0.8 (sluice exec finds it)"
if [ "$system" = 1 ]; then
    # Files in ld.so.conf.d are read in name order, and the first
    # directory holding a library wins: 00- comes before the system's.
    echo "$dir" > "$conf"
    ldconfig
    echo "every program now loads sluice's libpcap ($conf); undo with --uninstall"
fi
