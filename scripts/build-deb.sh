#!/usr/bin/env bash
# Builds the Debian package target/debian/sluice_VERSION-1_ARCH.deb with
# cargo-deb ([package.metadata.deb] in Cargo.toml): /usr/bin/sluice,
# sluice's libpcap as /usr/lib/sluice/libpcap.so.0.8 (and .so.1), where
# `sluice exec` and `sluice filter`'s hand-off to tcpdump find it, the
# manual pages and the bash, zsh and fish completions, generated here by
# the built command from the same definitions as its parser.
#   scripts/build-deb.sh [--profile release|dev]
# --profile dev packages the debug build `cargo test` made (the test
# command does that, to spare CI a release build); users take release.
# Installs cargo-deb first if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
while [ $# -gt 0 ]; do
    case "$1" in
        --profile) profile="$2"; shift 2 ;;
        *) echo "usage: $0 [--profile release|dev]" >&2; exit 2 ;;
    esac
done
case "$profile" in dev) dir=debug ;; *) dir="$profile" ;; esac
out="${CARGO_TARGET_DIR:-target}/$dir"
command -v cargo-deb >/dev/null 2>&1 || cargo install --locked cargo-deb
# The command and, beside it, libpcap.so (the default members).
cargo build --locked --profile "$profile"
stage="$out/deb"
rm -rf "$stage"
mkdir -p "$stage/man" "$stage/completions"
cp "$out/libpcap.so" "$stage/libpcap.so.0.8"
ln -s libpcap.so.0.8 "$stage/libpcap.so.1"
sluice="$out/sluice"
"$sluice" man | gzip -9n > "$stage/man/sluice.1.gz"
for sub in filter split flow list-interfaces replay exec bench completions man; do
    "$sluice" man "$sub" | gzip -9n > "$stage/man/sluice-$sub.1.gz"
done
"$sluice" completions bash > "$stage/completions/sluice"
"$sluice" completions zsh > "$stage/completions/_sluice"
"$sluice" completions fish > "$stage/completions/sluice.fish"
cargo deb --no-build --profile "$profile"
