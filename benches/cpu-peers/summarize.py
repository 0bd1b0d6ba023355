"""Summarises benches/cpu-peers/run's JSON lines into the side-by-side table (stdin-free:
`python summarize.py results.jsonl`). Per case: the median over every timed run of every round,
GPts/s, the ratio to the best peer, and the share of the STREAM triad (the median of the triad
probes taken in the same run), counting the minimal bytes per point: S1 reads f and writes
f_new (2 elements), S2 reads u, u_prev, v2 and writes u_next (4 elements)."""
import json
import statistics
import sys
from collections import defaultdict

lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
triads = [l["gbs"] for l in lines if l["who"] == "triad"]
loads = [l["loadavg"] for l in lines if l["who"] == "load"]
triad = statistics.median(triads)
runs = defaultdict(list)
rel = defaultdict(list)
for l in lines:
    if "case" not in l:
        continue
    key = (l["case"], l["dims"], l["prec"], l["n"])
    pts = float(l["n"]) ** l["dims"] * l["steps"]
    runs[key, l["who"]] += [pts / t / 1e9 for t in l["times"]]
    if "rel_l2_vs_ours" in l:
        rel[key, l["who"]].append(l["rel_l2_vs_ours"])

print(f"STREAM triad (12 B/element, best of 10, {len(triads)} probes): median {triad:.1f} GB/s, "
      f"range {min(triads):.1f}-{max(triads):.1f}; load average at the probes: {', '.join(loads)}\n")
print("| case | who | GPts/s (median) | min-max | vs best peer | % of triad | rel. L2 vs ours |")
print("|---|---|---:|---:|---:|---:|---:|")
for key in sorted({k for k, _ in runs}):
    case, dims, prec, n = key
    elem = 4 if prec == "f32" else 8
    bpp = (2 if case == "s1" else 4) * elem
    whos = sorted({w for k, w in runs if k == key}, key=lambda w: (w != "stencil", w))
    med = {w: statistics.median(runs[key, w]) for w in whos}
    peers = [w for w in whos if w != "stencil"]
    best = max((med[w] for w in peers), default=None)
    for w in whos:
        ratio = f"{med[w] / best:.2f}x" if best else "-"
        r = f"{max(rel[key, w]):.1e}" if rel[key, w] else "-"
        label = f"{case.upper()} {dims}D {prec} {n}^{dims}"
        name = f"**{w}**" if w == "stencil" else w
        print(f"| {label} | {name} | {med[w]:.3f} | {min(runs[key, w]):.2f}-{max(runs[key, w]):.2f} | {ratio} | "
              f"{100 * med[w] * bpp / triad:.0f}% | {r} |")
