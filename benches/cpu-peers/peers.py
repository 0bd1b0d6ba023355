"""The peers of the CPU side-by-side benchmark: pystencils and Devito on the problems that
`cpu_peers` (benches/src/bin/cpu_peers.rs) runs for this project, driven the way each tool is
meant to be used (OpenMP on, vectorised, one untimed warm-up run, fields re-initialised before
every timed run, the whole time loop timed with a wall clock).

    python peers.py TOOL VARIANT [--case s1,s2] [--dims 3] [--prec f32] [--n 256] [--n2 4096]
                    [--steps 50] [--runs 5] [--ours DIR]

TOOL VARIANT: pystencils vec (its AVX intrinsics vectoriser for the host CPU), pystencils omp
(plain C, left to the compiler), devito advanced (its default pipeline: blocking, SIMD, flop
reduction), devito autotune (advanced plus its aggressive block-shape autotuning, once, before
the timed runs). Threads: OMP_NUM_THREADS (the driver script sets OMP_PROC_BIND and OMP_PLACES).
Prints one JSON line per case; with --ours DIR each final field is compared with ours
(relative L2 norm, computed in float64) and the line says so.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("tool")
ap.add_argument("variant")
ap.add_argument("--case", default="s1,s2")
ap.add_argument("--dims", default="3")
ap.add_argument("--prec", default="f32")
ap.add_argument("--n", type=int, default=256)
ap.add_argument("--n2", type=int, default=4096)
ap.add_argument("--steps", type=int, default=50)
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--ours", default=None)
args = ap.parse_args()
THREADS = int(os.environ.get("OMP_NUM_THREADS", "1"))
A = 0.1
C = 1e-8
V2 = 1500.0 * 1500.0
K = [-205.0 / 72.0, 8.0 / 5.0, -1.0 / 5.0, 8.0 / 315.0, -1.0 / 560.0]


def initial(n, dims):
    """s(1) + 0.5 s(3), s(m) = prod over axes of sin(pi m (i + 1) / (n + 1)), in float64."""
    x = (np.arange(n, dtype=np.float64) + 1.0) / (n + 1)
    out = 0
    for m, w in ((1.0, 1.0), (3.0, 0.5)):
        s = np.sin(np.pi * m * x)
        prod = s[:, None, None] * s[None, :, None] * s[None, None, :] if dims == 3 else s[:, None] * s[None, :]
        out = out + w * prod
    return out


def padded(interior, halo, dtype):
    a = np.zeros(tuple(d + 2 * halo for d in interior.shape), dtype=dtype)
    a[(slice(halo, -halo),) * interior.ndim] = interior.astype(dtype)
    return a


def timed(setup, run):
    setup()
    run()  # warm-up: JIT compile, page faults
    times = []
    for _ in range(args.runs):
        setup()
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return times


def report(case, dims, prec, n, times, final, extra=None):
    pts = float(n) ** dims * args.steps
    med = statistics.median(times)
    line = dict(who=f"{args.tool}_{args.variant}", case=case, dims=dims, prec=prec, n=n, steps=args.steps,
                threads=THREADS, median_s=round(med, 5), times=[round(t, 5) for t in times],
                gpts=round(pts / med / 1e9, 4))
    if args.ours:
        path = os.path.join(args.ours, f"{case}_{dims}d_{prec}.bin")
        if os.path.exists(path):
            ours = np.fromfile(path, dtype=np.float32 if prec == "f32" else np.float64).reshape(final.shape)
            a, b = np.asarray(final, dtype=np.float64), ours.astype(np.float64)
            line["rel_l2_vs_ours"] = float(np.linalg.norm(a - b) / np.linalg.norm(b))
    line.update(extra or {})
    print(json.dumps(line), flush=True)


# ---- pystencils ------------------------------------------------------------------------------
def pystencils_cases(dims, prec, n):
    import pystencils as ps

    dtype = "float32" if prec == "f32" else "float64"
    np_t = np.float32 if prec == "f32" else np.float64

    def compile_kernel(assignment, halo):
        if args.variant == "vec":
            cfg = ps.CreateKernelConfig(target=ps.Target.CurrentCPU, ghost_layers=halo)
            cfg.cpu.vectorize.enable = True
            cfg.cpu.vectorize.assume_inner_stride_one = True
        else:
            cfg = ps.CreateKernelConfig(target=ps.Target.CPU, ghost_layers=halo)
        cfg.cpu.openmp.enable = True
        cfg.cpu.openmp.num_threads = THREADS
        cfg.default_dtype = dtype
        return ps.create_kernel([assignment], cfg).compile()

    def offset(axis, r):
        o = [0] * dims
        o[axis] = r
        return tuple(o)

    cases = args.case.split(",")
    if "s1" in cases:
        f, g = ps.fields(f"f, g: {dtype}[{dims}D]", layout="c")
        cc = 1.0 - 2.0 * dims * A
        rhs = cc * f[(0,) * dims]
        for axis in range(dims):
            rhs = rhs + A * f[offset(axis, 1)] + A * f[offset(axis, -1)]
        kern = compile_kernel(ps.Assignment(g[(0,) * dims], rhs), 1)
        ic = padded(initial(n, dims), 1, np_t)
        st = {}

        def setup():
            st["a"], st["b"] = ic.copy(), ic.copy()

        def run():
            a, b = st["a"], st["b"]
            for _ in range(args.steps):
                kern(f=a, g=b)
                a, b = b, a
            st["final"] = a

        times = timed(setup, run)
        report("s1", dims, prec, n, times, st["final"][(slice(1, -1),) * dims])
    if "s2" in cases:
        u, up, v2, un = ps.fields(f"u, up, v2, un: {dtype}[{dims}D]", layout="c")
        lap = dims * K[0] * u[(0,) * dims]
        for r in range(1, 5):
            ring = 0
            for axis in range(dims):
                ring = ring + u[offset(axis, r)] + u[offset(axis, -r)]
            lap = lap + K[r] * ring
        zero = (0,) * dims
        kern = compile_kernel(ps.Assignment(un[zero], 2 * u[zero] - up[zero] + C * v2[zero] * lap), 4)
        ic = padded(initial(n, dims), 4, np_t)
        vel2 = np.full(ic.shape, V2, dtype=np_t)
        st = {}

        def setup():
            st["p"], st["u"], st["n"] = ic.copy(), ic.copy(), ic.copy()

        def run():
            p, c, nx = st["p"], st["u"], st["n"]
            for _ in range(args.steps):
                kern(u=c, up=p, v2=vel2, un=nx)
                p, c, nx = c, nx, p
            st["final"] = c

        times = timed(setup, run)
        report("s2", dims, prec, n, times, st["final"][(slice(4, -4),) * dims])


# ---- Devito ----------------------------------------------------------------------------------
def devito_cases(dims, prec, n):
    from devito import Eq, Function, Grid, Operator, TimeFunction

    np_t = np.float32 if prec == "f32" else np.float64
    # Spacing 1: Devito's 8th-order Laplacian then has this problem's weights.
    grid = Grid(shape=(n,) * dims, extent=(float(n - 1),) * dims, dtype=np_t)
    ic = initial(n, dims).astype(np_t)
    cases = args.case.split(",")

    def run_op(op, setup, kw):
        kw = dict(kw)
        extra = {}
        if args.variant == "autotune":
            setup()
            op.apply(**kw, autotune="aggressive")
            runs = op._state.get("autotuning") or [{}]
            tuned = {k: v for k, v in runs[-1].get("tuned", {}).items() if k != "nthreads"}
            kw.update(tuned)
            extra["tuned"] = {k: int(v) for k, v in tuned.items()}  # empty: too short to tune
        return timed(setup, lambda: op.apply(**kw)), extra

    opt = "advanced"
    if "s1" in cases:
        f = TimeFunction(name="f", grid=grid, space_order=2, time_order=1)
        cc = 1.0 - 2.0 * dims * A
        rhs = cc * f
        for d in grid.dimensions:
            rhs = rhs + A * f.subs({d: d + 1}) + A * f.subs({d: d - 1})
        op = Operator([Eq(f.forward, rhs)], opt=opt)

        def setup():
            f.data[0] = ic
            f.data[1] = ic

        times, extra = run_op(op, setup, dict(time_m=0, time_M=args.steps - 1))
        report("s1", dims, prec, n, times, np.array(f.data[args.steps % 2]), extra)
    if "s2" in cases:
        u = TimeFunction(name="u", grid=grid, space_order=8, time_order=2)
        v2 = Function(name="v2", grid=grid, space_order=8)
        v2.data[:] = V2
        op = Operator([Eq(u.forward, 2 * u - u.backward + C * v2 * u.laplace)], opt=opt)

        def setup():
            for t in range(3):
                u.data[t] = ic

        # time_m = 1 .. time_M = steps computes steps updates; the last lands in (steps + 1) % 3.
        times, extra = run_op(op, setup, dict(time_m=1, time_M=args.steps))
        report("s2", dims, prec, n, times, np.array(u.data[(args.steps + 1) % 3]), extra)


for dims in [int(d) for d in args.dims.split(",")]:
    for prec in args.prec.split(","):
        n = args.n if dims == 3 else args.n2
        {"pystencils": pystencils_cases, "devito": devito_cases}[args.tool](dims, prec, n)
sys.exit(0)
