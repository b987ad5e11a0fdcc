#!/usr/bin/env python3
"""Plot ns per packet against the number of filters from the TSV that
scripts/bench-merging.sh writes (docs/merging-bench.tsv), as a small
hand-written SVG (no third-party packages, as scripts/plot-classifier.py):
two log-log panels, the shared corpus and the generated sets, each with the
default engine, tuple space search, sluice's native code one by one, libpcap
one by one and the floor; the issue's targets: libpcap ÷ 40 at 600 corpus
expressions, and 30 ns + 2 ns per match on the generated sets.

usage: scripts/plot-merging.py TSV [OUT.svg]   (default docs/merging-scaling.svg)
"""
import csv
import math
import sys

SERIES = [
    ("default_ns", "sluice default engine (native)", "#1f77b4", ""),
    ("tuple_ns", "tuple space search (native)", "#2ca02c", ""),
    ("native1_ns", "sluice native, one by one", "#9467bd", "6,3"),
    ("libpcap_ns", "libpcap bpf_filter, one by one", "#d62728", "6,3"),
    ("floor_ns", "floor: copy the matches", "#7f7f7f", "1,3"),
    ("target_ns", "target: 30 ns + 2 ns × matches", "#ff7f0e", "2,4"),
]


def num(cell):
    try:
        return float(cell)
    except (TypeError, ValueError):
        return None


def read(path):
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    for r in rows:
        m = num(r.get("matches_per_packet"))
        r["target_ns"] = "-" if m is None or r["section"] != "generated" else str(30 + 2 * m)
    return rows


def label_ns(v):
    if v < 1e3:
        return f"{v:g} ns"
    if v < 1e6:
        return f"{v / 1e3:g} µs"
    return f"{v / 1e6:g} ms"


def panel(s, rows, x0, title, xlabel, ymin, ymax, goal=None):
    """One panel at x offset x0 (appended to s); goal: (N, ns, label), a
    target point drawn as an open diamond."""
    top, ph, pw = 40, 330, 300
    ns = [int(r["n"]) for r in rows]
    xmin = math.floor(math.log10(min(ns)))
    xmax = math.ceil(math.log10(max(ns)))

    def px(n):
        return x0 + (math.log10(n) - xmin) / max(xmax - xmin, 1) * pw

    def py(v):
        return top + ph - (math.log10(v) - math.log10(ymin)) / (math.log10(ymax) - math.log10(ymin)) * ph

    s.append(f'<text x="{x0 + pw / 2}" y="{top - 12}" text-anchor="middle" font-weight="bold">{title}</text>')
    for e in range(xmin, xmax + 1):
        x = px(10 ** e)
        s.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#ddd"/>')
        s.append(f'<text x="{x:.1f}" y="{top + ph + 16}" text-anchor="middle">{10 ** e:,}</text>')
    e = round(math.log10(ymin))
    while 10 ** e <= ymax:
        y = py(10 ** e)
        s.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + pw}" y2="{y:.1f}" stroke="#ddd"/>')
        s.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{label_ns(10 ** e)}</text>')
        e += 1
    s.append(f'<rect x="{x0}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    s.append(f'<text x="{x0 + pw / 2}" y="{top + ph + 36}" text-anchor="middle">{xlabel}</text>')
    for col, _, color, dash in SERIES:
        pts = [(int(r["n"]), num(r.get(col))) for r in rows]
        pts = [(n, v) for n, v in pts if v]
        if not pts:
            continue
        d = " ".join(f"{px(n):.1f},{py(v):.1f}" for n, v in pts)
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        s.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="2"{extra}/>')
        for n, v in pts:
            s.append(f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="3" fill="{color}"/>')
    if goal:
        n, v, label = goal
        x, y = px(n), py(v)
        s.append(f'<path d="M {x:.1f} {y - 6:.1f} L {x + 6:.1f} {y:.1f} L {x:.1f} {y + 6:.1f} L {x - 6:.1f} {y:.1f} Z" fill="none" stroke="#ff7f0e" stroke-width="2"/>')
        s.append(f'<text x="{x - 10:.1f}" y="{y + 18:.1f}" text-anchor="end" fill="#ff7f0e">{label}</text>')


def main():
    src = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else "docs/merging-scaling.svg"
    rows = read(src)
    corpus = sorted((r for r in rows if r["section"] == "corpus"), key=lambda r: int(r["n"]))
    generated = sorted((r for r in rows if r["section"] == "generated"), key=lambda r: int(r["n"]))
    values = [num(r.get(c)) for r in corpus + generated for c, *_ in SERIES]
    values = [v for v in values if v]
    if not values:
        sys.exit(f"{src}: nothing to plot")
    ymin = 10 ** math.floor(math.log10(min(values)))
    ymax = 10 ** math.ceil(math.log10(max(values)))
    w, h = 1060, 440
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<text transform="translate(16,{40 + 165}) rotate(-90)" text-anchor="middle">time per packet</text>']
    goal = None
    lib600 = [num(r.get("libpcap_ns")) for r in corpus if r["n"] == "600"]
    if lib600 and lib600[0]:
        goal = (600, lib600[0] / 40, "target: libpcap ÷ 40")
    if corpus:
        panel(s, corpus, 80, "shared corpus capture", "first N corpus expressions", ymin, ymax, goal)
    if generated:
        panel(s, generated, 450, "generated sets and traffic", "generated filters (N)", ymin, ymax)
    for i, (_, name, color, dash) in enumerate(SERIES):
        ly = 60 + i * 24
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        s.append(f'<line x1="780" y1="{ly}" x2="810" y2="{ly}" stroke="{color}" stroke-width="2"{extra}/>')
        s.append(f'<text x="816" y="{ly + 4}">{name}</text>')
    s.append("</svg>")
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(s) + "\n")


if __name__ == "__main__":
    main()
