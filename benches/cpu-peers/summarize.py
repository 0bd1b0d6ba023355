"""Summarises benches/cpu-peers/run's JSON lines into the side-by-side table (stdin-free:
`python summarize.py results.jsonl`). Per case: the median over every timed run of every round,
GPts/s, the ratio to the best peer, and the share of the STREAM triad (the median of the triad
probes taken in the same run), counting the minimal bytes per point: S1 reads f and writes
f_new (2 elements), S2 reads u, u_prev, v2 and writes u_next (4 elements) per step (with several
steps per pass, `stencil+passK`, the fields pass through memory about once per K steps, so this
share can exceed 100%). With two rounds or more, a second table: ours against the best peer of
each round alone (ours' median in that round; with INTERLEAVE=1 ours runs beside every peer),
whose median moves less with a shared machine's slow and fast minutes than the ratio of the
medians over all rounds."""
import json
import statistics
import sys
from collections import defaultdict

lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
loads = [l["loadavg"] for l in lines if l["who"] == "load"]
triads = defaultdict(list)
for l in lines:
    if l["who"] == "triad":
        triads[l.get("threads", 0)].append(l["gbs"])
runs = defaultdict(list)
by_round = defaultdict(list)
rel = defaultdict(list)
round_no = 0
for l in lines:
    if l["who"] == "round":
        round_no = l["round"]
    if "case" not in l:
        continue
    key = (l.get("threads", 0), l["case"], l["dims"], l["prec"], l["n"])
    pts = float(l["n"]) ** l["dims"] * l["steps"]
    runs[key, l["who"]] += [pts / t / 1e9 for t in l["times"]]
    by_round[key, l["who"], round_no] += [pts / t / 1e9 for t in l["times"]]
    if "rel_l2_vs_ours" in l:
        rel[key, l["who"]].append(l["rel_l2_vs_ours"])


def target(case, dims, prec):
    """The targets (ratio to the best peer, share of the triad) of this project's line."""
    if dims == 3 and prec == "f32":
        return (1.05, 85) if case == "s1" else (1.2, 75)
    return (1.0, None)


for t in sorted(triads):
    tr = triads[t]
    print(f"STREAM triad at {t} threads (12 B/element, best of 10, {len(tr)} probes): median "
          f"{statistics.median(tr):.1f} GB/s, range {min(tr):.1f}-{max(tr):.1f}")
print(f"load average at the probes: {', '.join(loads)}")
# Threads that ran arithmetic at once, probed before ours and before the peers of each case: far
# below the thread count, the machine's CPUs shared cores for a while (a virtual machine's slow
# window), and compute-bound runs near that probe are slower than the machine.
# The wide probe keeps each core's arithmetic units busy: far below the first, threads share
# cores (SMT siblings), and compute-bound runs scale by fewer than the thread count.
probes, wide = defaultdict(list), defaultdict(list)
for l in lines:
    if l["who"] == "probe":
        probes[l["threads"]].append(l["parallel"])
        if "parallel_wide" in l:
            wide[l["threads"]].append(l["parallel_wide"])
for t in sorted(probes):
    low = [p for p in probes[t] if p < 0.75 * t]
    print(f"threads running at once, of {t} ({len(probes[t])} probes): {min(probes[t]):.2f}-{max(probes[t]):.2f}"
          + (f"; {len(low)} probes below {0.75 * t:.2f}: a slow window, compare those cases with care" if low else ""))
    if wide[t]:
        shared = max(wide[t]) < 0.75 * t
        print(f"  with wide arithmetic: {min(wide[t]):.2f}-{max(wide[t]):.2f}"
              + ("; the threads share cores' arithmetic units (SMT siblings?)" if shared else ""))
print()
print("| case | threads | who | GPts/s (median) | min-max | vs best peer | % of triad | target | rel. L2 vs ours |")
print("|---|---:|---|---:|---:|---:|---:|---|---:|")
for key in sorted({k for k, _ in runs}, key=lambda k: (k[1], k[2], k[3], k[4], k[0])):
    threads, case, dims, prec, n = key
    triad = statistics.median(triads.get(threads) or [x for v in triads.values() for x in v])
    elem = 4 if prec == "f32" else 8
    bpp = (2 if case == "s1" else 4) * elem
    ours = lambda w: w.startswith("stencil")
    whos = sorted({w for k, w in runs if k == key}, key=lambda w: (not ours(w), w))
    med = {w: statistics.median(runs[key, w]) for w in whos}
    peers = [w for w in whos if not ours(w)]
    best = max((med[w] for w in peers), default=None)
    for w in whos:
        ratio = f"{med[w] / best:.2f}x" if best else "-"
        share = 100 * med[w] * bpp / triad
        r = f"{max(rel[key, w]):.1e}" if rel[key, w] else "-"
        label = f"{case.upper()} {dims}D {prec} {n}^{dims}"
        name = f"**{w}**" if ours(w) else w
        goal = "-"
        if ours(w):
            want_ratio, want_share = target(case, dims, prec)
            met = (best is None or med[w] / best >= want_ratio) and (want_share is None or share >= want_share)
            goal = f">={want_ratio:.2f}x" + (f", >={want_share}%" if want_share else "") + (": met" if met else ": MISSED")
        print(f"| {label} | {threads} | {name} | {med[w]:.3f} | {min(runs[key, w]):.2f}-{max(runs[key, w]):.2f} | "
              f"{ratio} | {share:.0f}% | {goal} | {r} |")

rounds = sorted({r for _, _, r in by_round})
if len(rounds) >= 2:
    print()
    print("Ours against the best peer of each round (ours' median in the round / the best peer's):")
    print()
    print("| case | threads | who | per round | median | target |")
    print("|---|---:|---|---|---:|---|")
    for key in sorted({k for k, _ in runs}, key=lambda k: (k[1], k[2], k[3], k[4], k[0])):
        threads, case, dims, prec, n = key
        for w in sorted({w for k, w in runs if k == key and w.startswith("stencil")}):
            ratios = []
            for r in rounds:
                peers = [statistics.median(by_round[key, p, r]) for k, p in runs
                         if k == key and not p.startswith("stencil") and by_round[key, p, r]]
                if by_round[key, w, r] and peers:
                    ratios.append(statistics.median(by_round[key, w, r]) / max(peers))
            if not ratios:
                continue
            want = target(case, dims, prec)[0]
            med = statistics.median(ratios)
            print(f"| {case.upper()} {dims}D {prec} {n}^{dims} | {threads} | **{w}** | "
                  f"{' '.join(f'{x:.2f}' for x in ratios)} | {med:.2f}x | "
                  f">={want:.2f}x: {'met' if med >= want else 'MISSED'} ({sum(x >= want for x in ratios)} of {len(ratios)} rounds) |")
