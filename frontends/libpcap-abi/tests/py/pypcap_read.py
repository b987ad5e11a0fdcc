"""Reads captures through pypcap (the module `pcap`, built from source so
that it calls the system's libpcap.so.0.8), printing what every call
gives: pypcap.rs runs it on the candidate libpcap and on the system one
and compares the outputs.

Usage: pypcap_read.py CAPTURE...

Compiled programs are the compiler's choice, so only their verdicts on
each packet are printed, not their instructions.
"""

import re
import sys
import zlib

import pcap

FILTERS = ["", "tcp", "udp", "vlan", "ip6", "not ip", "tcp port 22 or tcp port 80"]
BAD = ["tcp port", "foo bar", "ether host zz:zz", "port 99999", "ip proto nosuchproto"]


def attempt(what, call):
    """Call, printing the result or the exception's type and message."""
    try:
        r = call()
        shown = r if r is None or isinstance(r, (int, str, bytes, tuple, list, float)) else type(r).__name__
        print("%s: %r" % (what, shown))
        return r
    except Exception as e:  # pypcap raises OSError, TypeError...
        print("%s: %s %s" % (what, type(e).__name__, re.sub(" at 0x[0-9a-f]+", "", str(e))))
        return None


def read_one(path):
    name = path.rsplit("/", 1)[-1]
    print("==", name)
    for ns in (False, True):
        p = pcap.pcap(name=path, timestamp_in_ns=ns)
        print("datalink", p.datalink(), "snaplen", p.snaplen, "dloff", p.dloff,
              "precision", p.precision, "fileno", p.fileno() >= 0)
        n = 0
        for ts, buf in p:
            print("pkt %d ts=%r n=%d crc=%08x" % (n, ts, len(buf), zlib.crc32(buf)))
            n += 1
        print("count", n)
    p = pcap.pcap(name=path)
    print("readpkts", [(ts, zlib.crc32(b)) for ts, b in p.readpkts()][:3])
    for cnt in (-1, 2):
        p = pcap.pcap(name=path)
        seen = []
        got = attempt("dispatch %d" % cnt, lambda: p.dispatch(cnt, lambda ts, b: seen.append(zlib.crc32(b))))
        print("dispatch %d saw %d first %r" % (cnt, len(seen), seen[:1]), got)
    frames = [b for _, b in pcap.pcap(name=path)]
    for f in FILTERS:
        p = pcap.pcap(name=path)
        attempt("setfilter %r" % f, lambda: p.setfilter(f))
        print("filter %r kept %r" % (f, [zlib.crc32(b) for _, b in p]))
        prog = attempt("bpf %r" % f, lambda: pcap.bpf(f.encode(), p.datalink()))
        if prog is not None:
            print("bpf %r verdicts %s" % (f, "".join("1" if prog.filter(b) else "0" for b in frames)))
    for f in BAD:
        p = pcap.pcap(name=path)
        attempt("setfilter %r" % f, lambda: p.setfilter(f))
        attempt("bpf %r" % f, lambda: pcap.bpf(f.encode()))


def main():
    for path in sys.argv[1:]:
        read_one(path)
    attempt("open missing", lambda: pcap.pcap(name="/nonexistent.pcap"))
    print("done")


main()
