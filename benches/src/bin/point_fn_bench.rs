//! Point functions on the CPU: one SSP-RK3 stage of the Euler model (HLLC, Koren, 256³ would
//! take minutes here: n³ cells, f64) written three ways, timed in one run on a random valid state:
//!
//! - *fused, written out* (`stencil_bench::euler_written_out`): one stencil, every face solved
//!   by both cells that share it (six solves per cell);
//! - *point functions* (the model's `euler_fused_hllc`): the same stage with the primitive state
//!   and the face fluxes as point functions (`let fx = |p: Idx3| ...;` evaluated at `idx` and
//!   `idx.ix(-1, 0, 0)`), which the CPU nest computes once per face along rows and across the
//!   rows of a block;
//! - *split* (the model's three face-flux stencils and update): every face solved once, through
//!   15 flux fields in memory.
//!
//! All three give the same bits (checked here). `point_fn_bench [--n N] [--runs R]`.

use std::time::Instant;
use stencil_bench::euler_written_out::EulerStageWrittenOut;
use stencil_bench::median;
use stencil_examples::euler::{
    EulerFluxXHllc, EulerFluxYHllc, EulerFluxZHllc, EulerFusedHllc, EulerUpdate, GAMMA, HALO,
};
use stencil_runtime::prelude::*;
use stencil_runtime::Loop;
use stencil_tests::SplitMix64;

/// Command line.
#[derive(clap::Parser)]
#[command(about = "One Euler stage on the CPU: fused, with point functions, and split (ms per stage)")]
struct Args {
    /// Cells per axis.
    #[arg(long, default_value_t = 96)]
    n: usize,
    /// Timed runs per variant (the median is reported), after one warm-up.
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

type Fields = [Field3<f64>; 5];

fn main() {
    let args = <Args as clap::Parser>::parse();
    let n = args.n;
    let shape = Shape3::new([n, n, n]).halo(HALO);
    let range = Loop3D::interior(&shape);
    let mut rng = SplitMix64::new(0x0e01_0001);
    // A random valid state: ρ and p in [0.5, 1.5], velocities in [-0.5, 0.5].
    let mut q: Fields = std::array::from_fn(|_| Field3::zeros(shape));
    stencil_tests::for_each_point(&shape, |g| {
        let w = [
            rng.uniform(0.5, 1.5),
            rng.uniform(-0.5, 0.5),
            rng.uniform(-0.5, 0.5),
            rng.uniform(-0.5, 0.5),
            rng.uniform(0.5, 1.5),
        ];
        let e = w[4] / (GAMMA - 1.0) + 0.5 * w[0] * (w[1] * w[1] + w[2] * w[2] + w[3] * w[3]);
        let c = [w[0], w[0] * w[1], w[0] * w[2], w[0] * w[3], e];
        for v in 0..5 {
            q[v].set(g, c[v]).unwrap();
        }
    });
    let qn: Fields = std::array::from_fn(|v| q[v].clone());
    let (kappa, beta) = (1.0 / 3.0, 2.0);
    // A step of 0.01 on cells of size 1 (`c = dt / h = 0.01`), no gravity.
    let (a, b, h, g) = (0.75, 0.25, 1.0, 0.0);
    let dt = Host.held(0.01).expect("a held scalar on the host");
    let time = |work: &mut dyn FnMut()| -> f64 {
        work();
        median(
            (0..args.runs)
                .map(|_| {
                    let t = Instant::now();
                    work();
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect(),
        )
    };
    let mut fused: Fields = std::array::from_fn(|_| Field3::filled(shape, f64::NAN));
    let mut points: Fields = std::array::from_fn(|_| Field3::filled(shape, f64::NAN));
    let mut split: Fields = std::array::from_fn(|_| Field3::filled(shape, f64::NAN));
    let mut fluxes: [Fields; 3] = std::array::from_fn(|_| std::array::from_fn(|_| Field3::zeros(shape)));
    let t_fused = time(&mut || {
        let out: [&mut Field3<f64>; 5] = fused.each_mut();
        let args = (GAMMA, kappa, beta, a, b, &dt, h, h, h, g, refs(&q), refs(&qn), out);
        range.run(EulerStageWrittenOut, args).unwrap();
    });
    let t_points = time(&mut || {
        let out: [&mut Field3<f64>; 5] = points.each_mut();
        range.run(EulerFusedHllc, (GAMMA, kappa, beta, a, b, &dt, h, h, h, g, refs(&q), refs(&qn), out)).unwrap();
    });
    let t_split = time(&mut || {
        // The flux at i+1/2 of every cell, and one layer below the range along each axis.
        let [fx, fy, fz] = &mut fluxes;
        let below = |axis: usize| {
            let mut begin = [HALO; 3];
            begin[axis] -= 1;
            Loop::from_parts(shape.extent(), begin, [HALO; 3])
        };
        below(0).run(EulerFluxXHllc, (GAMMA, kappa, beta, refs(&q), fx.each_mut())).unwrap();
        below(1).run(EulerFluxYHllc, (GAMMA, kappa, beta, refs(&q), fy.each_mut())).unwrap();
        below(2).run(EulerFluxZHllc, (GAMMA, kappa, beta, refs(&q), fz.each_mut())).unwrap();
        let out: [&mut Field3<f64>; 5] = split.each_mut();
        range
            .run(
                EulerUpdate,
                (a, b, &dt, h, h, h, g, refs(&q), refs(&qn), refs(&fluxes[0]), refs(&fluxes[1]), refs(&fluxes[2]), out),
            )
            .unwrap();
    });
    for v in 0..5 {
        for (name, f) in [("point functions", &points[v]), ("split", &split[v])] {
            let same = f.as_slice().iter().zip(fused[v].as_slice()).all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same, "{name} differs from fused in field {v}");
        }
    }
    // What a GPU kernel of each computes per cell (the IR with the point functions inlined).
    let flops = |ir: &stencil_runtime::codegen::StencilIr| stencil_runtime::codegen::analysis::flops_per_point(ir);
    let (fused_flops, points_flops) =
        (flops(<EulerStageWrittenOut as Stencil<3>>::ir()), flops(<EulerFusedHllc as Stencil<3>>::ir()));
    let threads = rayon::current_num_threads();
    println!(
        "Euler stage (HLLC, Koren), {n}³ cells f64, {threads} threads, median of {} runs; all three the same bits",
        args.runs
    );
    println!(
        "operations per cell where the point functions are inlined (a GPU kernel): written out {fused_flops}, \
         point functions {points_flops}"
    );
    println!("| variant | ms/stage | M cells/s | vs fused |");
    println!("|---|---:|---:|---:|");
    let cells = (n * n * n) as f64;
    for (name, t) in [
        ("written out (6 face solves per cell)", t_fused),
        ("point functions", t_points),
        ("split (15 flux fields)", t_split),
    ] {
        println!("| {name} | {t:.1} | {:.1} | {:.2}x |", cells / t / 1e3, t_fused / t);
    }
}

/// The fields of `f` by reference.
fn refs(f: &Fields) -> [&Field3<f64>; 5] {
    f.each_ref()
}
