#!/usr/bin/env bash
# Runs every test sluice has: formatting, lints, unit, property, corpus,
# differential, live-capture and libpcap ABI tests, and the Python module's
# (python/tests, in a venv under target/). Installs the Debian
# packages the tests compare against (libpcap-dev for the reference libpcap,
# tcpdump, ngrep, tshark, python3-pcapy...) when they are missing, and builds
# libpcap master (the oracle of the differential tests) from
# ../shared/reference once.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
[ -e /usr/include/pcap/pcap.h ] || need+=(libpcap-dev)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
# The live tests build a private network with ip (iproute2) and use
# unshare and setpriv (util-linux).
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
# tests/ebpf_system.rs counts the system's BPF programs and maps.
command -v bpftool >/dev/null 2>&1 || need+=(bpftool)
# The libpcap ABI tests (frontends/libpcap-abi/tests) run Debian's own
# programs on sluice's libpcap.so: tcpdump, ngrep, dumpcap (tshark),
# python3-pcapy; they compile C programs against <pcap/pcap.h> (gcc) and
# build pcapy-ng from source in a venv (g++, python3-dev, python3-venv).
command -v ngrep >/dev/null 2>&1 || need+=(ngrep)
command -v dumpcap >/dev/null 2>&1 || need+=(tshark)
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v g++ >/dev/null 2>&1 || need+=(g++)
/usr/bin/python3 -c 'import pcapy' >/dev/null 2>&1 || need+=(python3-pcapy)
# More of Debian's libpcap programs and bindings, run on both libraries
# (frontends/libpcap-abi/tests/programs.rs, tests/live/abi.rs): installing
# them all takes about 25 s on a fresh machine.
command -v ettercap >/dev/null 2>&1 || need+=(ettercap-text-only)
command -v iftop >/dev/null 2>&1 || need+=(iftop)
command -v tcptrace >/dev/null 2>&1 || need+=(tcptrace)
command -v tcpslice >/dev/null 2>&1 || need+=(tcpslice)
command -v tcpreplay >/dev/null 2>&1 || need+=(tcpreplay)
command -v tracestats >/dev/null 2>&1 || need+=(libtrace-tools)
command -v tcpflow >/dev/null 2>&1 || need+=(tcpflow)
command -v p0f >/dev/null 2>&1 || need+=(p0f)
command -v tcpick >/dev/null 2>&1 || need+=(tcpick)
command -v ssldump >/dev/null 2>&1 || need+=(ssldump)
command -v httpry >/dev/null 2>&1 || need+=(httpry)
command -v tcpstat >/dev/null 2>&1 || need+=(tcpstat)
command -v softflowd >/dev/null 2>&1 || need+=(softflowd)
command -v urlsnarf >/dev/null 2>&1 || need+=(dsniff)
command -v sngrep >/dev/null 2>&1 || need+=(sngrep)
command -v nmap >/dev/null 2>&1 || need+=(nmap)
command -v hping3 >/dev/null 2>&1 || need+=(hping3)
command -v arping >/dev/null 2>&1 || need+=(arping)
/usr/bin/perl -MNet::Pcap -e1 >/dev/null 2>&1 || need+=(libnet-pcap-perl)
command -v ruby >/dev/null 2>&1 && ruby -e 'require "pcaprub"' >/dev/null 2>&1 || need+=(ruby-pcaprub)
/usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
[ -n "$(ls /usr/include/python3*/Python.h 2>/dev/null)" ] || need+=(python3-dev)
# The daemon's status page is loaded in headless Chromium
# (tests/live/daemon_http.rs); its systemd unit is checked with
# systemd-analyze (tests/live/daemon_ops.rs).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
# libpcap master is built from its source (../shared/reference) with cmake,
# flex and bison.
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v flex >/dev/null 2>&1 || need+=(flex)
command -v bison >/dev/null 2>&1 || need+=(bison)
# The Python module's cluster test serves captures with Debian's nginx;
# its compressed-input tests write zstd files with zstd.
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v zstd >/dev/null 2>&1 || need+=(zstd)
# The README's install route: setcap (libcap2-bin) and man (man-db).
command -v setcap >/dev/null 2>&1 || [ -x /usr/sbin/setcap ] || need+=(libcap2-bin)
command -v man >/dev/null 2>&1 || need+=(man-db)
# tests/compile_cost.rs counts the instructions of a large compile with
# valgrind's callgrind (a count, not a time, so machine load does not
# matter).
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
# pcapy-ng and pypcap, built from source so that they link the system
# libpcap.so.0.8 (binary wheels carry a libpcap of their own).
venv="${CARGO_TARGET_DIR:-target}/pcapy-ng-venv"
case "$venv" in /*) ;; *) venv="$PWD/$venv" ;; esac
if ! "$venv/bin/python" -m pip show pcapy-ng pypcap >/dev/null 2>&1; then
    [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --no-binary pcapy-ng,pypcap pcapy-ng pypcap
fi
export SLUICE_PCAPY_NG_PYTHON="$venv/bin/python"
export SLUICE_PYPCAP_PYTHON="$venv/bin/python"
# libpcap master, the reference for what an expression means (Debian ships
# 1.10.3): built once into target/libpcap-master (the script stamps it). The
# tests that compare with it load it from there, and must not skip.
../shared/reference/build-libpcap-master.sh "${CARGO_TARGET_DIR:-target}/libpcap-master" >/dev/null
export SLUICE_MASTER_REQUIRED=1
# Every tool the ABI tests use is installed now: they must run, not skip.
export SLUICE_ABI_REQUIRED=1
export SLUICE_VALGRIND_REQUIRED=1
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# As root the live tests can make network namespaces: they must run, not skip.
[ "$(id -u)" = 0 ] && export SLUICE_LIVE_REQUIRED=1
cargo test --workspace
# The Python module (python/): the wheel built with maturin, installed into
# a fresh virtualenv and tested there with pytest against libpcap's verdicts
# (the corpus oracle), dpkt's readers, the sluice command, a Dask
# LocalCluster of 2 workers and, as root, live capture, the daemon and a
# cluster of namespaces fed by nginx. The test dependencies (and maturin)
# live in target/python-venv, made once; the fresh venv reaches them through
# a .pth file, so it holds sluice from the wheel only and costs seconds.
pyvenv="${CARGO_TARGET_DIR:-target}/python-venv"
case "$pyvenv" in /*) ;; *) pyvenv="$PWD/$pyvenv" ;; esac
if ! "$pyvenv/bin/python" -c 'import maturin, numpy, pytest, dpkt, distributed, pyarrow, pandas, fsspec, aiohttp' >/dev/null 2>&1; then
    /usr/bin/python3 -m venv "$pyvenv"
    "$pyvenv/bin/python" -m pip install -q -r python/requirements-test.txt
fi
# A module installed there (maturin develop) would shadow the wheel.
"$pyvenv/bin/python" -m pip uninstall -y -q sluice-pf sluice >/dev/null 2>&1 || true
wheels="$(dirname "$pyvenv")/wheels"
rm -rf "$wheels"
VIRTUAL_ENV="$pyvenv" PATH="$pyvenv/bin:$PATH" maturin build --release -q -m python/Cargo.toml -o "$wheels"
testvenv="$(dirname "$pyvenv")/python-test-venv"
rm -rf "$testvenv"
/usr/bin/python3 -m venv "$testvenv"
"$pyvenv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
    > "$("$testvenv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/sluice-test-deps.pth"
"$testvenv/bin/python" -m pip install -q --no-deps --no-index "$wheels"/sluice_pf-*.whl
SLUICE_CORPUS_REQUIRED=1 SLUICE_BIN="$(dirname "$pyvenv")/debug/sluice" \
    "$testvenv/bin/python" -m pytest -q -p no:cacheprovider python/tests
# The Debian package, built and installed as the README says (cargo-deb
# from crates.io; a release build), then the README's commands, live and
# exec ones included, run again against the installed /usr/bin/sluice.
# As root only: installing is what it tests.
if [ "$(id -u)" = 0 ]; then
    command -v cargo-deb >/dev/null 2>&1 || cargo install --locked cargo-deb
    scripts/build-deb.sh
    cargo run --release -- filter -r examples/sample.pcap 'tcp port 80'
    had=0
    dpkg -s sluice >/dev/null 2>&1 && had=1
    debs="${CARGO_TARGET_DIR:-target}/debian"
    case "$debs" in /*) ;; *) debs="./$debs" ;; esac
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$debs"/sluice_*.deb
    SLUICE_README_BIN=/usr/bin/sluice cargo test --test cli readme
    # The daemon's unit, users and policy came with it, and the unit is
    # valid where systemd looks for it.
    for f in /usr/lib/systemd/system/sluice-daemon.service \
        /usr/lib/sysusers.d/sluice-daemon.conf /etc/sluice/daemon.policy; do
        [ -f "$f" ] || { echo "the package did not install $f" >&2; exit 1; }
    done
    systemd-analyze verify --man=no /usr/lib/systemd/system/sluice-daemon.service
    [ "$had" = 1 ] || DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq sluice
fi
