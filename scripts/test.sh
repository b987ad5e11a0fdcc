#!/usr/bin/env bash
# Runs every test sluice has: formatting, lints, unit, property, corpus and
# differential tests. Installs the Debian packages the tests compare against
# (libpcap-dev for the reference libpcap, tcpdump) when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
[ -e /usr/include/pcap/pcap.h ] || need+=(libpcap-dev)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
