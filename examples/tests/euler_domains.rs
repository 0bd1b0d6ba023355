//! The Euler model over subdomains (its one `run` on the distributed executor) equals the
//! single-domain run bit for bit: a small grid of odd
//! sizes (13×11×7 cells, so every split below is uneven) with mixed boundaries (one axis
//! periodic, one reflective, one outflow, in three arrangements), run a few CFL steps (the last
//! one shortened) over several process grids, fused and split stages, HLLC and Rusanov. Every
//! cell, the step count and the times passed to `after_step` must agree to the bit. With the
//! `cuda` feature, GPU subdomains are compared with the host single-domain run too (skipped with
//! a message where there is no GPU).

use stencil_examples::checkpoint::Plan;
use stencil_examples::euler::{Boundary, Conserved, Euler, Riemann, Scheme, State};
use stencil_runtime::{Decomposition, Distributed, Field3, Host, Overlap};

const N: [usize; 3] = [13, 11, 7];

/// Process grids: one domain, splits along one, two and three axes (13 = 7 + 6 = 5 + 4 + 4,
/// 11 = 6 + 5, 7 = 4 + 3).
const GRIDS: [[usize; 3]; 5] = [[1, 1, 1], [2, 1, 1], [1, 2, 2], [3, 2, 1], [2, 2, 2]];

/// Mixed boundaries: every axis periodic, reflective and outflow once.
const BOUNDARIES: [[Boundary; 3]; 3] = [
    [Boundary::Periodic, Boundary::Reflective, Boundary::Outflow],
    [Boundary::Reflective, Boundary::Outflow, Boundary::Periodic],
    [Boundary::Outflow, Boundary::Periodic, Boundary::Reflective],
];

fn model(boundaries: [Boundary; 3], scheme: Scheme, riemann: Riemann) -> Euler {
    let mut e = Euler::cube(8, 1.0);
    e.n = N;
    e.h = N.map(|n| 1.0 / n as f64);
    e.boundaries = boundaries;
    e.scheme = scheme;
    e.riemann = riemann;
    e
}

/// A blast off the centre in a flow that crosses every boundary, with density varying along
/// every axis: nothing symmetric, so a misplaced halo shows.
fn initial(e: &Euler) -> Conserved<Field3<f64>> {
    e.from_primitive(|[x, y, z]| {
        let r2 = (x - 0.4).powi(2) + (y - 0.55).powi(2) + (z - 0.5).powi(2);
        let p = if r2 < 0.06 { 5.0 } else { 0.5 };
        let rho = 1.0 + 0.2 * (6.0 * x).sin() * (5.0 * z).cos() + 0.1 * y;
        [rho, 0.4 - 0.3 * y, -0.2 + 0.3 * x, 0.3 * z - 0.1, p]
    })
}

/// The cells of a host state in storage order.
fn cells(e: &Euler, q: &Conserved<Field3<f64>>) -> Vec<[f64; 5]> {
    let mut out = Vec::new();
    e.for_each_cell(q, |_, q| out.push(q));
    out
}

/// The number of cells whose five values are not all bitwise equal.
fn differing(e: &Euler, a: &Conserved<Field3<f64>>, b: &Conserved<Field3<f64>>) -> usize {
    let (a, b) = (cells(e, a), cells(e, b));
    assert_eq!(a.len(), b.len());
    a.iter().zip(&b).filter(|(a, b)| (0..5).any(|v| a[v].to_bits() != b[v].to_bits())).count()
}

/// The end time of about `steps` CFL steps of the initial state (not a multiple of the step:
/// the last one is shortened).
fn t_end(e: &Euler, q0: &Conserved<Field3<f64>>, steps: f64) -> f64 {
    steps * e.dt(&Host, &State::new(&Host, e, q0).unwrap()).unwrap()
}

/// The single-domain run on the host: final state, steps, and `(step, t)` of every step.
type Run = (Conserved<Field3<f64>>, usize, Vec<(usize, u64)>);

fn single(e: &Euler, q0: &Conserved<Field3<f64>>, t_end: f64, dt_every: usize) -> Run {
    let mut calls = Vec::new();
    let (q, steps, _) = e.run(&Host, q0, t_end, dt_every, &Plan::none(), |s, t| calls.push((s, t.to_bits()))).unwrap();
    (q, steps, calls)
}

/// The single-domain run on the distributed executor over `grid` with `overlap`.
fn decomposed(
    e: &Euler,
    grid: [usize; 3],
    overlap: Overlap,
    q0: &Conserved<Field3<f64>>,
    t_end: f64,
    dt_every: usize,
) -> Run {
    let d = e.decompose(grid.iter().product(), Some(grid)).unwrap();
    assert_eq!(d.grid(), grid);
    let exec = Distributed::host(d).unwrap().with_overlap(overlap).unwrap();
    let mut calls = Vec::new();
    let (q, steps, _) = e.run(&exec, q0, t_end, dt_every, &Plan::none(), |s, t| calls.push((s, t.to_bits()))).unwrap();
    (q, steps, calls)
}

const MODES: [Overlap; 3] = [Overlap::None, Overlap::OneDivided, Overlap::TwoDivided];

#[test]
fn host_subdomains_equal_the_single_domain_bit_for_bit() {
    let mut runs = 0;
    for boundaries in BOUNDARIES {
        for riemann in [Riemann::Hllc, Riemann::Rusanov] {
            for scheme in [Scheme::Fused, Scheme::Split] {
                let e = model(boundaries, scheme, riemann);
                let q0 = initial(&e);
                let t_end = t_end(&e, &q0, 3.4);
                let (q, steps, calls) = single(&e, &q0, t_end, 1);
                assert!(steps >= 3, "{steps} steps");
                for grid in GRIDS {
                    let overlap = MODES[runs % 3];
                    let (qd, steps_d, calls_d) = decomposed(&e, grid, overlap, &q0, t_end, 1);
                    let bad = differing(&e, &qd, &q);
                    let what = format!("{boundaries:?} {riemann:?} {scheme:?} grid {grid:?} {overlap:?}");
                    eprintln!("{what}: {steps_d} steps (single domain {steps}), {bad} cells differ");
                    assert_eq!(bad, 0, "{what}: cells differ from the single-domain run");
                    assert_eq!(steps_d, steps, "{what}: step count");
                    assert_eq!(calls_d, calls, "{what}: after_step calls");
                    runs += 1;
                }
            }
        }
    }
    assert_eq!(runs, BOUNDARIES.len() * 4 * GRIDS.len());
}

#[test]
fn time_step_reused_between_computations_and_every_axis_periodic() {
    // `dt_every` 3: the CFL step of the last computation is reused; and a fully periodic box
    // (every neighbour, across the wrap too, is another subdomain or the subdomain itself).
    for boundaries in [[Boundary::Periodic; 3], BOUNDARIES[0]] {
        for scheme in [Scheme::Fused, Scheme::Split] {
            let e = model(boundaries, scheme, Riemann::Hllc);
            let q0 = initial(&e);
            let t_end = t_end(&e, &q0, 5.3);
            let (q, steps, calls) = single(&e, &q0, t_end, 3);
            for (grid, overlap) in [[3, 2, 1], [2, 2, 2], [1, 1, 3]].into_iter().zip(MODES) {
                let (qd, steps_d, calls_d) = decomposed(&e, grid, overlap, &q0, t_end, 3);
                let what = format!("{boundaries:?} {scheme:?} grid {grid:?} {overlap:?}, dt every 3 steps");
                assert_eq!(differing(&e, &qd, &q), 0, "{what}");
                assert_eq!((steps_d, &calls_d), (steps, &calls), "{what}");
            }
        }
    }
}

/// Each step sized on the executor (`dt_on_device`: the rate and the clock reduced into held
/// scalars, the steps replayed from two recordings where the executor records) gives the bits,
/// step count and times of the host's own-state sizing (`dt_every` 1), on one host domain and on
/// host subdomains; sizing on the executor with another sizing asked is refused.
#[test]
fn step_sizes_on_the_executor_give_the_bits_of_each_steps_own_state() {
    for (k, boundaries) in BOUNDARIES.into_iter().enumerate() {
        let scheme = [Scheme::Fused, Scheme::Split][k % 2];
        let mut e = model(boundaries, scheme, Riemann::Hllc);
        let q0 = initial(&e);
        let t_end = t_end(&e, &q0, 4.6);
        let (q, steps, calls) = single(&e, &q0, t_end, 1);
        e.dt_on_device = true;
        let (qs, steps_s, calls_s) = single(&e, &q0, t_end, 1);
        let what = format!("{boundaries:?} {scheme:?} sized on the executor");
        assert_eq!(differing(&e, &qs, &q), 0, "{what}: cells differ");
        assert_eq!((steps_s, &calls_s), (steps, &calls), "{what}: steps and times");
        for (grid, overlap) in [[2, 1, 1], [3, 2, 1], [2, 2, 2]].into_iter().zip(MODES) {
            let (qd, steps_d, calls_d) = decomposed(&e, grid, overlap, &q0, t_end, 1);
            assert_eq!(differing(&e, &qd, &q), 0, "{what}, grid {grid:?} {overlap:?}");
            assert_eq!((steps_d, &calls_d), (steps, &calls), "{what}, grid {grid:?}: steps and times");
        }
        e.dt_lagged = true;
        let m = e.run(&Host, &q0, t_end, 1, &Plan::none(), |_, _| {}).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(m.contains("leave dt_lagged off"), "{m}");
    }
}

#[test]
fn bad_decompositions_are_refused_with_a_reason() {
    let e = model(BOUNDARIES[0], Scheme::Fused, Riemann::Hllc);
    let q0 = initial(&e);
    let err = |r: Result<_, Box<dyn std::error::Error>>| r.err().map(|e| e.to_string()).unwrap_or_default();

    let m = err(e.decompose(4, Some([2, 1, 1])).map(|_| ()));
    assert!(m.contains("not the 4 asked for"), "{m}");
    let m = err(e.decompose(0, None).map(|_| ()));
    assert!(m.contains("0 subdomains"), "{m}");
    // 7 cells along z over 4 domains leaves subdomains of 1 cell, thinner than the halo of 2.
    let m = err(e.decompose(4, Some([1, 1, 4])).map(|_| ()));
    assert!(m.contains("thinner than the halo"), "{m}");

    let run = |d: Decomposition<3>, q0: &Conserved<Field3<f64>>| {
        err(e.run(&Distributed::host(d).unwrap(), q0, 0.01, 1, &Plan::none(), |_, _| {}).map(|_| ()))
    };
    // Periodic axes that are not the model's periodic boundaries: a wall asked along a wrapped
    // axis, or a wrap along a split walled one, is refused by the executor.
    let m = run(Decomposition::new(N, [2, 1, 1], [false; 3], [2; 3]).unwrap(), &q0);
    assert!(m.contains("not periodic in the decomposition"), "{m}");
    let m = run(Decomposition::new(N, [1, 1, 1], [true, true, false], [2; 3]).unwrap(), &q0);
    assert!(m.contains("makes periodic"), "{m}");
    // Another global grid.
    let m = run(Decomposition::new([12, 11, 7], [2, 1, 1], [true, false, false], [2; 3]).unwrap(), &q0);
    assert!(m.contains("[12, 11, 7]") && m.contains("whole grid"), "{m}");
    // A state that lost positivity fails as the single-domain run does.
    let mut neg = q0.clone();
    neg[0] = Field3::from_fn(*q0[0].shape(), |g| if g == [6, 5, 3] { -1.0 } else { q0[0].get(g).unwrap() });
    let single = err(e.run(&Host, &neg, 0.01, 1, &Plan::none(), |_, _| {}).map(|_| ()));
    let m = run(e.decompose(6, Some([3, 2, 1])).unwrap(), &neg);
    assert_eq!(m, single);
}

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use stencil_runtime::cuda::Gpu;

    /// The GPUs, or `None` (and a message) where there is none: the comparison is then skipped.
    fn gpus() -> Option<usize> {
        match Gpu::count() {
            Ok(n) if n > 0 => Some(n),
            Ok(_) => {
                eprintln!("skipped: no GPU (the CUDA driver sees none)");
                None
            }
            Err(e) => {
                eprintln!("skipped: no GPU ({e})");
                None
            }
        }
    }

    #[test]
    fn gpu_subdomains_equal_the_host_single_domain() {
        let Some(count) = gpus() else { return };
        for (boundaries, riemann) in [(BOUNDARIES[0], Riemann::Hllc), (BOUNDARIES[2], Riemann::Rusanov)] {
            for scheme in [Scheme::Fused, Scheme::Split] {
                let e = model(boundaries, scheme, riemann);
                let q0 = initial(&e);
                let t_end = t_end(&e, &q0, 3.4);
                let (q, steps, calls) = single(&e, &q0, t_end, 1);
                let gpu = Gpu::new(0).unwrap();
                let (qg, steps_g, _) = e.run(&gpu, &q0, t_end, 1, &Plan::none(), |_, _| {}).unwrap();
                for grid in [[2, 1, 1], [1, 2, 2], [3, 2, 1]] {
                    let d = e.decompose(grid.iter().product(), Some(grid)).unwrap();
                    let execs = (0..d.len()).map(|i| Gpu::new(i % count)).collect::<Result<Vec<_>, _>>().unwrap();
                    let domains = stencil_runtime::Domains::new(d, execs).unwrap().with_host_threads().unwrap();
                    let mut calls_d = Vec::new();
                    let exec = Distributed::new(domains).with_overlap(Overlap::OneDivided).unwrap();
                    let (qd, steps_d, _) =
                        e.run(&exec, &q0, t_end, 1, &Plan::none(), |s, t| calls_d.push((s, t.to_bits()))).unwrap();
                    let (vs_host, vs_gpu) = (differing(&e, &qd, &q), differing(&e, &qd, &qg));
                    let what = format!("{boundaries:?} {riemann:?} {scheme:?} grid {grid:?} on {count} GPU(s)");
                    eprintln!(
                        "{what}: {steps_d} steps; cells differing from the host single domain: {vs_host}, from the \
                         GPU single domain: {vs_gpu}"
                    );
                    assert_eq!(vs_gpu, 0, "{what}: GPU subdomains differ from the GPU single domain");
                    assert_eq!(steps_g, steps_d, "{what}: step count vs the GPU single domain");
                    assert_eq!(vs_host, 0, "{what}: GPU subdomains differ from the host single domain");
                    assert_eq!((steps_d, &calls_d), (steps, &calls), "{what}: steps vs the host");
                    eprintln!("{what}: the single-domain run on the distributed executor is bit-equal");
                }
            }
        }
    }
}

#[test]
fn a_stage_past_the_third_is_refused() {
    let e = model(BOUNDARIES[0], Scheme::Fused, Riemann::Hllc);
    let mut s = State::new(&Host, &e, &initial(&e)).unwrap();
    let m = e.stage(&Host, &mut s, 3).unwrap_err().to_string();
    assert!(m.contains("stages 0, 1 and 2, not 3"), "{m}");
}
