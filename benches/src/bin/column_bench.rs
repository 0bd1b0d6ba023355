//! Column-sweep benchmark: one step of the column model (`stencil_examples::column`: implicit
//! vertical diffusion of two fields by the Thomas algorithm, then warm-rain microphysics with
//! sedimentation; three sweeps) on the host, against the same step hand-written the usual way
//! of column physics (each column copied into local arrays, walked level by level and copied
//! back; columns in parallel with rayon), and against a STREAM triad measured in the same run.
//! The hand-written step must give the same bits. `--order` picks the fields' element order:
//! `ijk` (columns across the contiguous axis), `kij` (each column contiguous) or `both` (the
//! default: one table, the two orders' steps from the same state, which must give the same bits).
//!
//! Effective bandwidth counts the minimal bytes: 88 B per point for the diffusion (the up sweep
//! reads `ρ, t, q_v` and writes `c', d'_t, d'_q`; the down sweep reads those three and writes
//! `t, q_v`), 88 B for warm rain (reads `p, ρ`, reads and writes `t, q_v, q_c, q_r`, writes the
//! rain flux), 176 B for the step. The sweeps' parts are timed apart: the diffusion moves memory,
//! warm rain computes (an `exp`, two `powf` and a `sqrt` per point).

use clap::{Parser, ValueEnum};
use rayon::prelude::*;
use stencil_bench::time;
use stencil_examples::column::{moist_bubble, Column, State};
use stencil_runtime::prelude::*;

/// Column model step: generated sweeps vs hand-written column loops vs STREAM triad.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Columns along x and y.
    #[arg(long, default_value_t = 512)]
    n: usize,
    /// Levels per column.
    #[arg(long, default_value_t = 128)]
    levels: usize,
    /// Timed steps (the median is reported) after one warm-up step.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// The fields' element order.
    #[arg(long, value_enum, default_value_t = Orders::Both)]
    order: Orders,
}

/// Element orders to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Orders {
    /// `Order::Ijk`: the column axis is the slowest.
    Ijk,
    /// `Order::Kij`: the column axis is the contiguous one.
    Kij,
    /// Both, one after the other.
    Both,
}

/// Minimal bytes per point of each part of a step.
const DIFFUSION_BYTES: f64 = 88.0;
const RAIN_BYTES: f64 = 88.0;
const DT: f64 = 5.0;
const DZ: f64 = 100.0;
const DIFFUSIVITY: f64 = 20.0;

/// STREAM triad `a = b + s c` over three arrays of `len` f64, in parallel chunks (24 B per
/// element).
fn triad_gbs(len: usize, runs: usize) -> f64 {
    let (b, c, mut a) = (vec![1.0f64; len], vec![2.0f64; len], vec![0.0f64; len]);
    let s = time(runs, || {
        a.par_chunks_mut(1 << 15).zip(b.par_chunks(1 << 15)).zip(c.par_chunks(1 << 15)).for_each(|((a, b), c)| {
            for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
                *a = b + 0.5 * c;
            }
        })
    });
    std::hint::black_box(&a);
    24.0 * len as f64 / s / 1e9
}

/// Raw storage shared by the column tasks (each writes only its own column).
#[derive(Clone, Copy)]
struct Shared(*mut f64);
// SAFETY: the tasks write disjoint columns.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

/// The column model's step written by hand: each column into local arrays, the three passes,
/// back into the fields (same arithmetic, same order as the stencils).
fn hand_step(state: &mut State<Field3<f64>>, rain_out: &mut Field3<f64>, r: f64) {
    let shape = *state.t.shape();
    let [nx, ny, nz] = shape.interior();
    let [si, sj, sk] = shape.strides();
    let origin = shape.offset([0, 0, 1]);
    let (p, rho) = (state.p.as_slice(), state.rho.as_slice());
    let ptrs = [&mut state.t, &mut state.qv, &mut state.qc, &mut state.qr, rain_out]
        .map(|f| Shared(f.as_mut_slice().as_mut_ptr()));
    (0..nx * ny).into_par_iter().for_each_init(
        || [(); 9].map(|_| vec![0.0f64; nz]),
        |cols, c| {
            let base = origin + (c % nx) * si + (c / nx) * sj;
            let at = |k: usize| base + k * sk;
            let [t, qv, qc, qr, pc, rc, cp, dt, dq] = cols;
            for k in 0..nz {
                // SAFETY: in bounds (the interior), this task's own column.
                unsafe {
                    (t[k], qv[k], qc[k], qr[k]) =
                        (*ptrs[0].0.add(at(k)), *ptrs[1].0.add(at(k)), *ptrs[2].0.add(at(k)), *ptrs[3].0.add(at(k)));
                }
                (pc[k], rc[k]) = (p[at(k)], rho[at(k)]);
            }
            // Implicit vertical diffusion: up, then down.
            let (mut c_below, mut dt_below, mut dq_below) = (0.0, 0.0, 0.0);
            for k in 0..nz {
                let density = rc[k];
                let lower = if k > 0 { r * 0.5 * (density + rc[k - 1]) } else { 0.0 };
                let upper = if k + 1 < nz { r * 0.5 * (density + rc[k + 1]) } else { 0.0 };
                let m = density + lower + upper + lower * c_below;
                c_below = -upper / m;
                dt_below = (density * t[k] + lower * dt_below) / m;
                dq_below = (density * qv[k] + lower * dq_below) / m;
                (cp[k], dt[k], dq[k]) = (c_below, dt_below, dq_below);
            }
            let (mut t_above, mut q_above) = (0.0, 0.0);
            for k in (0..nz).rev() {
                t_above = dt[k] - cp[k] * t_above;
                q_above = dq[k] - cp[k] * q_above;
                (t[k], qv[k]) = (t_above, q_above);
            }
            // Warm rain, from the top down.
            let (lv, cpa, rv) = (2.5e6, 1004.0, 461.5);
            let mut flux_above = 0.0;
            for k in (0..nz).rev() {
                let (mut temp, mut vapour, mut cloud, mut rain) = (t[k], qv[k], qc[k], qr[k]);
                let qs = 380.0 / pc[k] * (17.27 * (temp - 273.15) / (temp - 35.86)).exp();
                let excess = (vapour - qs) / (1.0 + lv * lv * qs / (cpa * rv * temp * temp));
                let change = excess.max(-cloud);
                vapour -= change;
                cloud += change;
                temp += lv / cpa * change;
                let auto = (1.0e-3 * (cloud - 1.0e-3)).max(0.0) * DT;
                let accr = 2.2 * cloud * rain.max(0.0).powf(0.875) * DT;
                let to_rain = (auto + accr).min(cloud);
                cloud -= to_rain;
                rain += to_rain;
                let density = rc[k];
                let fall = 36.34 * (1.0e-3 * density * rain.max(0.0)).powf(0.1364) * (1.2 / density).sqrt();
                let flux = density * rain * fall;
                rain += DT * (flux_above - flux) / (density * DZ);
                flux_above = flux;
                // SAFETY: as above.
                unsafe {
                    *ptrs[0].0.add(at(k)) = temp;
                    *ptrs[1].0.add(at(k)) = vapour;
                    *ptrs[2].0.add(at(k)) = cloud;
                    *ptrs[3].0.add(at(k)) = rain;
                    *ptrs[4].0.add(at(k)) = flux;
                }
            }
        },
    );
}

fn same_bits(a: &Field3<f64>, b: &Field3<f64>) -> bool {
    a.as_slice().iter().zip(b.as_slice()).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// `state` with its fields in element order `order` (same values, halo included).
fn reordered(state: &State<Field3<f64>>, order: Order) -> State<Field3<f64>> {
    state.map(|f| Field3::from_fn(f.shape().order(order), |g| f.get(g).expect("same points")))
}

/// Whether `a` and `b` (of any element orders) hold the same bits at every interior point.
fn same_values(a: &Field3<f64>, b: &Field3<f64>) -> bool {
    let [nx, ny, nz] = a.shape().interior();
    (0..nz as isize).all(|k| {
        (0..ny as isize)
            .all(|j| (0..nx as isize).all(|i| a.get([i, j, k]).map(f64::to_bits) == b.get([i, j, k]).map(f64::to_bits)))
    })
}

fn main() {
    let Args { n, levels, runs, order } = Args::parse();
    let size = [n, n, levels];
    let points = (n * n * levels) as f64;
    let threads = rayon::current_num_threads();
    println!("column model step on {n} x {n} x {levels} f64 ({threads} threads), median of {runs}");
    let initial = moist_bubble(size, DZ);
    let triad = triad_gbs(n * n * levels, runs);
    let orders: &[Order] = match order {
        Orders::Ijk => &[Order::Ijk],
        Orders::Kij => &[Order::Kij],
        Orders::Both => &[Order::Ijk, Order::Kij],
    };

    println!("STREAM triad: {triad:.1} GB/s");
    println!("| order | step | ms | M points/s | effective GB/s | % of triad |");
    println!("|---|---|---:|---:|---:|---:|");
    let step_bytes = DIFFUSION_BYTES + RAIN_BYTES;
    let mut results: Vec<Field3<f64>> = Vec::new();
    for &order in orders {
        let initial = reordered(&initial, order);
        let mut generated = Column::new(&Host, &initial, DIFFUSIVITY, DZ).expect("fields");
        let t_gen = time(runs, || generated.step(&Host, DT).expect("step"));
        // The parts alone (on a copy: the compared run stays at 1 + runs steps).
        let mut parts = Column::new(&Host, &initial, DIFFUSIVITY, DZ).expect("fields");
        let t_diffuse = time(runs, || parts.diffuse(&Host, DT).expect("diffusion"));
        let t_rain = time(runs, || parts.rain(&Host, DT).expect("warm rain"));

        let mut hand = reordered(&initial, order);
        let mut rain_out = Field3::zeros(*hand.t.shape());
        let r = DIFFUSIVITY * DT / (DZ * DZ);
        let t_hand = time(runs, || hand_step(&mut hand, &mut rain_out, r));

        // Both ran 1 + runs steps from the same state.
        let equal = [
            (&generated.state.t, &hand.t),
            (&generated.state.qv, &hand.qv),
            (&generated.state.qc, &hand.qc),
            (&generated.state.qr, &hand.qr),
            (&generated.rain_out, &rain_out),
        ]
        .iter()
        .all(|(a, b)| same_bits(a, b));
        assert!(equal, "the hand-written step and the sweeps differ ({order:?})");
        // Every order's step gives the same bits.
        let fields =
            [generated.state.t, generated.state.qv, generated.state.qc, generated.state.qr, generated.rain_out];
        if results.is_empty() {
            results = fields.into();
        } else {
            assert!(
                results.iter().zip(&fields).all(|(a, b)| same_values(a, b)),
                "the orders' steps differ ({order:?})"
            );
        }

        for (name, s, bytes) in [
            ("generated: diffusion (2 sweeps)", t_diffuse, DIFFUSION_BYTES),
            ("generated: warm rain (1 sweep)", t_rain, RAIN_BYTES),
            ("generated: whole step (3 sweeps)", t_gen, step_bytes),
            ("hand-written column loops: whole step", t_hand, step_bytes),
        ] {
            let gbs = bytes * points / s / 1e9;
            println!(
                "| {order:?} | {name} | {:.1} | {:.0} | {gbs:.1} | {:.0}% |",
                s * 1e3,
                points / s / 1e6,
                100.0 * gbs / triad
            );
        }
    }
    println!(
        "after {} steps the hand-written steps give the sweeps' bits (every point of storage), and the orders agree at every interior point",
        runs + 1
    );
}
