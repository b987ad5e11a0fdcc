"""Reads captures through pcapy (Debian's python3-pcapy, or pcapy-ng: both
are the module `pcapy` and call libpcap), printing what every call gives:
debian.rs runs it on the candidate libpcap and on the system one and
compares the outputs, and the files written through pcapy's dumper.

Usage: pcapy_read.py OUT_DIR CAPTURE...

Compiled programs (BPFProgram.get_bpf) are the compiler's choice, so only
their verdicts on each packet are printed, not their instructions.
"""

import os
import re
import sys
import zlib

import pcapy

FILTERS = ["", "tcp", "udp", "vlan", "ip6", "not ip", "tcp port 22 or tcp port 80"]


def packet_line(what, hdr, data):
    sec, usec = hdr.getts()
    return "%s caplen=%d len=%d ts=%d.%06d crc=%08x n=%d" % (
        what, hdr.getcaplen(), hdr.getlen(), sec, usec, zlib.crc32(data), len(data))


def attempt(what, call):
    """Call, printing the result or the exception's type and message."""
    try:
        r = call()
        shown = r if r is None or isinstance(r, (int, str, tuple, list)) else type(r).__name__
        print("%s: %r" % (what, shown))
        return r
    except Exception as e:  # pcapy raises PcapError, BPFError, ValueError...
        # Without object addresses, which differ from run to run.
        print("%s: %s %s" % (what, type(e).__name__, re.sub(" at 0x[0-9a-f]+", "", str(e))))
        return None


def every(r):
    """Every packet by next(), as (header, data), until pcapy's empty end."""
    while True:
        hdr, data = r.next()
        if hdr is None or (not data and hdr.getcaplen() == 0 and hdr.getlen() == 0):
            return
        yield hdr, data


def read_one(out_dir, path):
    name = os.path.basename(path)
    print("==", name)
    r = pcapy.open_offline(path)
    print("datalink", r.datalink(), "net", r.getnet(), "mask", r.getmask())
    attempt("getnonblock", r.getnonblock)
    attempt("stats", r.stats)
    # next() until the end: pcapy returns an empty header at the end.
    n = 0
    for hdr, data in every(r):
        print(packet_line("next %d" % n, hdr, data))
        n += 1
    print("next count", n)
    # loop and dispatch with counts (Debian's pcapy 0.11 calls their
    # callback without arguments under Python 3.11: a TypeError on either
    # library).
    for method, cnt in (("loop", -1), ("loop", 2), ("dispatch", -1), ("dispatch", 3)):
        r = pcapy.open_offline(path)
        seen = []
        got = attempt(
            "%s %d" % (method, cnt),
            lambda: getattr(r, method)(cnt, lambda h, d: seen.append(packet_line("cb", h, d))),
        )
        print("%s %d callbacks %d first %s" % (method, cnt, len(seen), seen[:1]), got is None)
    # Filters: setfilter then what next() gives (Debian's pcapy calls
    # loop()'s callback wrongly after setfilter); BPFProgram verdicts
    # packet by packet.
    for f in FILTERS:
        r = pcapy.open_offline(path)
        attempt("setfilter %r" % f, lambda: r.setfilter(f))
        kept = [zlib.crc32(d) for _, d in every(r)]
        print("filter %r kept %d crc %08x" % (f, len(kept), zlib.crc32(repr(kept).encode())))
        bpf = attempt("compile %r" % f, lambda: pcapy.compile(r.datalink(), 65535, f, 1, 0))
        if bpf is not None:
            r = pcapy.open_offline(path)
            verdicts = ["1" if bpf.filter(d) else "0" for _, d in every(r)]
            print("BPFProgram %r verdicts %s" % (f, "".join(verdicts)))
    # A dumper: every packet written again.
    r = pcapy.open_offline(path)
    d = r.dump_open(os.path.join(out_dir, name + ".dump"))
    for h, data in every(r):
        d.dump(h, data)
    del d
    # pcapy-ng's additions, where present.
    r = pcapy.open_offline(path)
    if hasattr(r, "next_batch"):
        batch = attempt("next_batch", lambda: len(r.next_batch(5)))
        print("next_batch", batch)


def errors(out_dir):
    attempt("open missing", lambda: pcapy.open_offline(os.path.join(out_dir, "missing.pcap")))
    empty = os.path.join(out_dir, "empty.bin")
    open(empty, "wb").close()
    attempt("open empty", lambda: pcapy.open_offline(empty))
    text = os.path.join(out_dir, "text.txt")
    with open(text, "w") as f:
        f.write("not a capture\n")
    attempt("open text", lambda: pcapy.open_offline(text))
    for bad in ("tcp port", "ip host 1.2.3", "foo"):
        attempt("compile %r" % bad, lambda: pcapy.compile(1, 65535, bad, 1, 0))


def main():
    out_dir = sys.argv[1]
    os.chdir(out_dir)  # error messages quote names: relative ones
    errors(".")
    for path in sys.argv[2:]:
        read_one(".", path)
    sys.stdout.flush()


main()
