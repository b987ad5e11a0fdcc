#!/usr/bin/env python3
"""Plot ns per packet against the number of filters from the Markdown table
that scripts/bench-classifier.sh prints, as a small hand-written SVG (no
third-party packages). Both axes are logarithmic.

usage: scripts/plot-classifier.py TABLE.md [OUT.svg]   (default docs/classifier-scaling.svg)
"""
import math
import re
import sys

SERIES = [
    ("sluice classify", "sluice, per packet", "#1f77b4", ""),
    ("sluice batch 16", "sluice, batches of 16", "#2ca02c", ""),
    ("sluice native first-match batch 64", "sluice native code, batches of 64", "#9467bd", ""),
    ("memory floor", "memory floor (header + one table line)", "#7f7f7f", "1,3"),
    ("handdemux.c", "handdemux.c (hand-written hash)", "#ff7f0e", "6,3"),
    ("libpcap × N (pcap crate)", "libpcap, N programs in sequence", "#d62728", "2,3"),
]


def ns(cell):
    m = re.match(r"\s*([0-9.,]+)\s*(ns|µs|ms)", cell)
    if not m:
        return None
    return float(m.group(1).replace(",", "")) * {"ns": 1, "µs": 1e3, "ms": 1e6}[m.group(2)]


def read_table(path):
    # The first table of the file.
    rows = []
    for line in open(path, encoding="utf-8"):
        if line.strip().startswith("|"):
            rows.append(line.strip())
        elif rows:
            break
    head = [c.strip() for c in rows[0].strip("|").split("|")]
    data = []
    for r in rows[2:]:
        cells = [c.strip() for c in r.strip("|").split("|")]
        data.append(dict(zip(head, cells)))
    return data


def main():
    src = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else "docs/classifier-scaling.svg"
    rows = read_table(src)
    w, h, left, right, top, bottom = 720, 440, 70, 250, 20, 50
    pw, ph = w - left - right, h - top - bottom
    ns_all = [ns(r.get(k, "")) for r in rows for k, *_ in SERIES]
    ns_all = [v for v in ns_all if v]
    ymin = 10 ** math.floor(math.log10(min(ns_all)))
    ymax = 10 ** math.ceil(math.log10(max(ns_all)))
    xmin, xmax = 0, 6

    def px(n):
        return left + (math.log10(n) - xmin) / (xmax - xmin) * pw

    def py(v):
        return top + ph - (math.log10(v) - math.log10(ymin)) / (math.log10(ymax) - math.log10(ymin)) * ph

    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>']
    for e in range(xmin, xmax + 1):
        x = px(10 ** e)
        s.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#ddd"/>')
        label = f"{10 ** e:,}"
        s.append(f'<text x="{x:.1f}" y="{top + ph + 16}" text-anchor="middle">{label}</text>')
    e = int(math.log10(ymin))
    while 10 ** e <= ymax:
        y = py(10 ** e)
        v = 10 ** e
        label = f"{v:g} ns" if v < 1e3 else (f"{v / 1e3:g} µs" if v < 1e6 else f"{v / 1e6:g} ms")
        s.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#ddd"/>')
        s.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
        e += 1
    s.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    s.append(f'<text x="{left + pw / 2}" y="{h - 12}" text-anchor="middle">installed TCP session filters (N)</text>')
    s.append(f'<text transform="translate(16,{top + ph / 2}) rotate(-90)" text-anchor="middle">time per packet</text>')
    for i, (col, name, color, dash) in enumerate(SERIES):
        pts = [(int(r["N"].replace(",", "")), ns(r.get(col, ""))) for r in rows]
        pts = [(n, v) for n, v in pts if v]
        if not pts:
            continue
        d = " ".join(f"{px(n):.1f},{py(v):.1f}" for n, v in pts)
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        s.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="2"{extra}/>')
        for n, v in pts:
            s.append(f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="3" fill="{color}"/>')
        ly = top + 20 + i * 22
        s.append(f'<line x1="{left + pw + 14}" y1="{ly}" x2="{left + pw + 44}" y2="{ly}" stroke="{color}" stroke-width="2"{extra}/>')
        s.append(f'<text x="{left + pw + 50}" y="{ly + 4}">{name}</text>')
    s.append("</svg>")
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(s) + "\n")


if __name__ == "__main__":
    main()
