#!/usr/bin/env bash
# Runs every test sluice has: formatting, lints, unit, property, corpus,
# differential and live-capture tests. Installs the Debian packages the tests compare against
# (libpcap-dev for the reference libpcap, tcpdump) when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
[ -e /usr/include/pcap/pcap.h ] || need+=(libpcap-dev)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
# The live tests build a private network with ip (iproute2) and use
# unshare and setpriv (util-linux).
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# As root the live tests can make network namespaces: they must run, not skip.
[ "$(id -u)" = 0 ] && export SLUICE_LIVE_REQUIRED=1
cargo test --workspace
