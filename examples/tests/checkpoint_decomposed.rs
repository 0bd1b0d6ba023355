//! Checkpoint and restart of decomposed runs on host subdomains, for the acoustic, Euler and
//! shallow water models (diffusion's are in `checkpoint_restart.rs`): over several process grids,
//! uneven splits included, `N` steps, a checkpoint, a restart and `N` more steps give the run of
//! `2N` steps straight through, bit for bit, and the single-domain run's fields. The
//! models' checkpoints are of the global state (the one driver of each model, on the distributed
//! executor), a restart runs on another process grid or on one domain, and a restart that does
//! not fit the run (other settings or numerics, a damaged file, another model's checkpoint) is an
//! error that says what differs.

mod common;

use common::{bits, interior_bits};
use std::path::PathBuf;

use stencil_examples::acoustic::{self, RegionStrategies};
use stencil_examples::checkpoint::Plan;
use stencil_examples::euler::{Boundary, Euler, Scheme};
use stencil_examples::swe::{self, Edge};
use stencil_runtime::io::IoError;
use stencil_runtime::{Distributed, Field, Host, Overlap};

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    common::scratch("ckpt-parts", name)
}

/// The bits of every trace value.
fn trace_bits(traces: &[Vec<f32>]) -> Vec<u32> {
    traces.iter().flatten().map(|v| v.to_bits()).collect()
}

/// The `IoError` inside a model's boxed error.
fn io_error(e: Box<dyn std::error::Error>) -> IoError {
    match e.downcast::<IoError>() {
        Ok(e) => *e,
        Err(e) => panic!("not an I/O error: {e}"),
    }
}

/// A small pseudo-random generator (xorshift), for set-ups that vary from case to case.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// A small acoustic model with the source and receiver line moved by `rng`.
fn acoustic_model(rng: &mut Rng, steps: usize) -> acoustic::Model {
    let mut m = acoustic::Model::layered(17, steps);
    m.n = [17, 15 + rng.below(3), 16];
    m.pml = 4;
    m.f0 = 25.0;
    m.source = [6 + rng.below(5), 5 + rng.below(5), 3 + rng.below(3)];
    m.receiver_depth = 2;
    m
}

#[test]
fn decomposed_acoustic_restarts_bit_for_bit_on_any_placement() {
    // The model's one checkpointed run on the distributed executor: the global state written
    // once, a restart on another process grid (or one domain) gives the uninterrupted run.
    let dir = scratch("acoustic");
    let n = 5;
    let mut rng = Rng(0x5eed_a11c);
    let strategies = RegionStrategies::default();
    // Process grids of 2, 3 and 4 subdomains; the model's grid (17 + 8 points per axis and so on)
    // splits unevenly over most of them. Each case restarts on the next case's grid.
    let grids = [[2, 1, 1], [1, 3, 1], [1, 1, 2], [2, 2, 1], [1, 2, 2]];
    for (case, grid) in grids.into_iter().enumerate() {
        let model = acoustic_model(&mut rng, 2 * n);
        let overlap = [Overlap::None, Overlap::OneDivided, Overlap::TwoDivided][rng.below(3)];
        let single = acoustic::run::<Host, f32>(&Host, &strategies, &model, None, &Plan::none(), |_| {}).unwrap();
        let on = |grid: [usize; 3]| {
            let d = model.decompose(grid.iter().product(), Some(grid)).unwrap();
            Distributed::host(d).unwrap().with_overlap(overlap).unwrap()
        };
        let exec = on(grid);
        let plan = Plan::every("acoustic3d", n, &dir.join(format!("case-{case}")));
        let what = format!("acoustic over grid {grid:?}, {overlap:?}, source {:?}", model.source);
        let whole = acoustic::run::<_, f32>(&exec, &strategies, &model, None, &plan, |_| {}).unwrap();
        let start = whole.start;
        assert_eq!(start, 0);
        assert_eq!(bits(&whole.last.u), bits(&single.last.u), "{what}: a run writing checkpoints");
        assert_eq!(trace_bits(&whole.traces), trace_bits(&single.traces), "{what}: traces");
        assert!(plan.path(n).is_file() && plan.path(2 * n).is_file(), "{what}: checkpoints written");

        let restart = plan.clone().restart_from(&plan.path(n));
        let elsewhere = on(grids[(case + 1) % grids.len()]);
        let mut seen = Vec::new();
        let resumed =
            acoustic::run::<_, f32>(&elsewhere, &strategies, &model, Some(n + 2), &restart, |s| seen.push(s)).unwrap();
        let start = resumed.start;
        assert_eq!((start, seen), (n, (n + 1..=2 * n).collect::<Vec<_>>()), "{what}");
        assert_eq!(bits(&resumed.last.u), bits(&single.last.u), "{what}: u after a restart at step {n}");
        assert_eq!(bits(&resumed.last.u_prev), bits(&single.last.u_prev), "{what}: u_prev after the restart");
        assert_eq!(trace_bits(&resumed.traces), trace_bits(&single.traces), "{what}: every step's traces");
        assert!(single.traces.iter().flatten().any(|v| *v != 0.0), "{what}: the wave reached no receiver");
        let shorter = acoustic::Model { steps: n + 2, ..model.clone() };
        let snap = acoustic::run::<Host, f32>(&Host, &strategies, &shorter, None, &Plan::none(), |_| {}).unwrap();
        assert_eq!(bits(&resumed.snapshot.unwrap().u), bits(&snap.last.u), "{what}: the snapshot after the restart");
        // A restart from the last checkpoint runs no step and gives the same outcome.
        let at_end = plan.clone().restart_from(&plan.path(2 * n));
        let end = acoustic::run::<_, f32>(&exec, &strategies, &model, None, &at_end, |_| {}).unwrap();
        let start = end.start;
        assert_eq!(start, 2 * n);
        assert_eq!(bits(&end.last.u), bits(&single.last.u), "{what}: restarted at the last step");
        assert_eq!(trace_bits(&end.traces), trace_bits(&single.traces), "{what}: traces from the checkpoint only");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The blast wave of `euler3d` on a small uneven grid, with the boundaries given.
fn blast(boundaries: [Boundary; 3], scheme: Scheme) -> (Euler, [Field<f64, 3>; 5]) {
    let mut e = Euler::cube(12, 1.0);
    e.n = [13, 11, 12];
    e.h = e.n.map(|n| 1.0 / n as f64);
    e.boundaries = boundaries;
    e.scheme = scheme;
    let q0 = e.from_primitive(|[x, y, z]| {
        let r2 = (x - 0.45).powi(2) + (y - 0.55).powi(2) + (z - 0.5).powi(2);
        [1.0 + 0.1 * y, 0.2 - 0.3 * z, 0.1 * x, -0.1, if r2 < 0.04 { 10.0 } else { 0.1 }]
    });
    (e, q0)
}

#[test]
fn decomposed_euler_restarts_bit_for_bit() {
    let dir = scratch("euler");
    let t_end = 0.03;
    // The last case takes each step's CFL step from the state one step before (lagged).
    let cases = [
        ([Boundary::Reflective; 3], Scheme::Fused, [2, 1, 1], 1, Overlap::None),
        (
            [Boundary::Periodic, Boundary::Reflective, Boundary::Outflow],
            Scheme::Fused,
            [1, 3, 1],
            2,
            Overlap::OneDivided,
        ),
        ([Boundary::Outflow, Boundary::Periodic, Boundary::Reflective], Scheme::Split, [2, 1, 2], 1, Overlap::None),
        (
            [Boundary::Reflective, Boundary::Outflow, Boundary::Periodic],
            Scheme::Fused,
            [3, 2, 1],
            3,
            Overlap::OneDivided,
        ),
        (
            [Boundary::Reflective, Boundary::Periodic, Boundary::Outflow],
            Scheme::Fused,
            [2, 2, 1],
            1,
            Overlap::OneDivided,
        ),
    ];
    let lagged_case = cases.len() - 1;
    for (case, (boundaries, scheme, grid, dt_every, overlap)) in cases.into_iter().enumerate() {
        let (mut e, q0) = blast(boundaries, scheme);
        let (single, steps, _) = e.run(&Host, &q0, t_end, dt_every, &Plan::none(), |_, _| {}).unwrap();
        let (single, steps) = if case == lagged_case {
            e.dt_lagged = true;
            let (lagged, lagged_steps, _) = e.run(&Host, &q0, t_end, dt_every, &Plan::none(), |_, _| {}).unwrap();
            assert_ne!(interior_bits(&lagged[0]), interior_bits(&single[0]), "the lag changes the steps");
            (lagged, lagged_steps)
        } else {
            (single, steps)
        };
        assert!(steps > 6, "{steps} steps");
        let on = |grid: [usize; 3]| {
            let d = e.decompose(grid.iter().product(), Some(grid)).unwrap();
            Distributed::host(d).unwrap().with_overlap(overlap).unwrap()
        };
        let exec = on(grid);
        let plan = Plan::every("euler3d", 3, &dir.join(format!("case-{case}")));
        let what = format!("euler {boundaries:?} {scheme:?} {overlap:?} over grid {grid:?}, dt every {dt_every}");
        let (whole, whole_steps, start) = e.run(&exec, &q0, t_end, dt_every, &plan, |_, _| {}).unwrap();
        assert_eq!((whole_steps, start), (steps, 0), "{what}");
        // Restarts on this grid, on another one and on one domain.
        let elsewhere = on([grid[2], grid[0], grid[1]]);
        for at in [3, 6] {
            let restart = plan.clone().restart_from(&plan.path(at));
            let runs = [
                e.run(&exec, &q0, t_end, dt_every, &restart, |_, _| {}).unwrap(),
                e.run(&elsewhere, &q0, t_end, dt_every, &restart, |_, _| {}).unwrap(),
                e.run(&Host, &q0, t_end, dt_every, &restart, |_, _| {}).unwrap(),
            ];
            for (r, (resumed, resumed_steps, start)) in runs.iter().enumerate() {
                assert_eq!((*start, *resumed_steps), (at, steps), "{what}");
                for v in 0..5 {
                    assert_eq!(interior_bits(&whole[v]), interior_bits(&single[v]), "{what}: variable {v}");
                    assert_eq!(
                        interior_bits(&resumed[v]),
                        interior_bits(&single[v]),
                        "{what}: variable {v}, restart {r} at {at}"
                    );
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn decomposed_restarts_that_do_not_fit_the_run_are_refused_with_what_differs() {
    let dir = scratch("refused");
    // Euler over [2, 2, 1]: a restart with other settings or numerics, or from a damaged file,
    // is refused.
    let (e, q0) = blast([Boundary::Reflective; 3], Scheme::Fused);
    let t_end = 0.02;
    let exec = Distributed::host(e.decompose(4, Some([2, 2, 1])).unwrap()).unwrap();
    let plan = Plan::every("euler3d", 2, &dir);
    e.run(&exec, &q0, t_end, 1, &plan, |_, _| {}).unwrap();
    let path = plan.path(2);
    let restart = plan.clone().restart_from(&path);
    let refuse = |e: &Euler, dt_every: usize, plan: &Plan| {
        e.run(&exec, &q0, t_end, dt_every, plan, |_, _| {}).map(drop).unwrap_err()
    };
    let e3 = io_error(refuse(&e, 2, &restart));
    assert!(e3.to_string().contains("dt_every"), "{e3}");
    let other = Euler { limiter: stencil_examples::euler::Limiter::Minmod, ..e };
    let e4 = io_error(refuse(&other, 1, &restart));
    assert!(e4.to_string().contains("Minmod") && e4.to_string().contains("Koren"), "{e4}");
    // A damaged file: a flipped bit in a field.
    let good = std::fs::read(&path).unwrap();
    let mut flipped = good.clone();
    let at = good.len() - 100;
    flipped[at] ^= 0x01;
    std::fs::write(&path, &flipped).unwrap();
    let e7 = io_error(refuse(&e, 1, &restart));
    assert_eq!(e7.code(), "S0407", "{e7}");

    // Acoustic: another velocity model or time step over the same decomposition.
    let mut rng = Rng(7);
    let model = acoustic_model(&mut rng, 4);
    let strategies = RegionStrategies::default();
    let exec = Distributed::host(model.decompose(3, Some([1, 3, 1])).unwrap()).unwrap();
    let aplan = Plan::every("acoustic3d", 2, &dir.join("acoustic"));
    let run = |m: &acoustic::Model, p: &Plan| acoustic::run::<_, f32>(&exec, &strategies, m, None, p, |_| {}).map(drop);
    run(&model, &aplan).unwrap();
    let arestart = aplan.clone().restart_from(&aplan.path(2));
    let mut slower = model.clone();
    slower.layers[1].v = 2400.0;
    let e10 = io_error(run(&slower, &arestart).unwrap_err());
    assert!(e10.to_string().contains("velocity model (V² Δt² per point)"), "{e10}");
    let mut other = model.clone();
    other.dt *= 0.9;
    let e11 = io_error(run(&other, &arestart).unwrap_err());
    assert!(e11.to_string().contains("dt is"), "{e11}");
    // Another model's checkpoint.
    let e12 = io_error(
        e.run(&exec, &q0, t_end, 1, &Plan::every("euler3d", 2, &dir).restart_from(&aplan.path(2)), |_, _| {})
            .map(drop)
            .unwrap_err(),
    );
    assert!(e12.to_string().contains("acoustic3d"), "{e12}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A perturbed dam break off the centre of a small uneven basin, with the edges given and a
/// flow that crosses them.
fn dam_break(edges: [Edge; 2]) -> (swe::Model, swe::State<Field<f64, 2>>) {
    let model = swe::Model { n: [13, 11], dx: [0.3, 0.25], edges, cfl: 0.45 };
    let q0 = model.initial(|[x, y]| {
        let dam = if (x - 0.4).powi(2) + (y + 0.3).powi(2) < 1.2 { 2.0 } else { 1.0 };
        let h = dam + 0.05 * (2.0 * x).sin() * (3.0 * y).cos() + 0.02 * (7.0 * x * y).sin();
        [h, h * (0.3 - 0.2 * y), h * (0.15 * x - 0.25)]
    });
    (model, q0)
}

/// The interior bits of `h`, `hu` and `hv`.
fn swe_bits(q: &swe::State<Field<f64, 2>>) -> Vec<u64> {
    [&q.h, &q.hu, &q.hv].into_iter().flat_map(interior_bits).collect()
}

#[test]
fn decomposed_swe_restarts_bit_for_bit_on_any_placement() {
    let dir = scratch("swe");
    let t_end = 0.25;
    let cases = [
        ([Edge::Wall, Edge::Wall], [2, 1]),
        ([Edge::Periodic, Edge::Wall], [1, 3]),
        ([Edge::Outflow, Edge::Periodic], [3, 2]),
        ([Edge::Periodic, Edge::Periodic], [2, 2]),
        ([Edge::Wall, Edge::Outflow], [1, 4]),
    ];
    for (case, (edges, grid)) in cases.into_iter().enumerate() {
        let (model, q0) = dam_break(edges);
        let mut single = swe::Solver::new(Host, model, &q0).unwrap();
        single.run_until(t_end, |_| {}).unwrap();
        assert!(single.steps > 6, "{} steps", single.steps);
        let single_bits = swe_bits(&single.state().unwrap());
        let on = |grid: [usize; 2]| Distributed::host(model.decompose(grid[0] * grid[1], Some(grid)).unwrap()).unwrap();
        let plan = Plan::every("swe2d", 3, &dir.join(format!("case-{case}")));
        let what = format!("swe {edges:?} over grid {grid:?}");
        let (whole, start) = swe::run_with(on(grid), model, &q0, t_end, &plan, |_, _| {}).unwrap();
        assert_eq!((whole.steps, whole.t.to_bits(), start), (single.steps, single.t.to_bits(), 0), "{what}");
        assert_eq!(swe_bits(&whole.state().unwrap()), single_bits, "{what}");
        for at in [3, 6] {
            // Restarted on the transposed grid.
            let restart = plan.clone().restart_from(&plan.path(at));
            let mut times = Vec::new();
            let (resumed, start) =
                swe::run_with(on([grid[1], grid[0]]), model, &q0, t_end, &restart, |s, _| times.push(s)).unwrap();
            assert_eq!(start, at, "{what}");
            assert_eq!(times.first(), Some(&(at + 1)), "{what}: the first step after the restart");
            assert_eq!((resumed.steps, resumed.t.to_bits()), (single.steps, single.t.to_bits()), "{what}");
            assert_eq!(swe_bits(&resumed.state().unwrap()), single_bits, "{what}: restart at {at}");
        }
    }
    // Refused: other edges, another CFL number, a damaged file.
    let (model, q0) = dam_break([Edge::Wall, Edge::Wall]);
    let plan = Plan::every("swe2d", 2, &dir.join("refused"));
    let exec = Distributed::host(model.decompose(4, Some([2, 2])).unwrap()).unwrap();
    swe::run_with(exec.clone(), model, &q0, 0.15, &plan, |_, _| {}).unwrap();
    let restart = plan.clone().restart_from(&plan.path(2));
    let refuse = |model: swe::Model| {
        io_error(swe::run_with(exec.clone(), model, &q0, 0.15, &restart, |_, _| {}).map(drop).unwrap_err())
    };
    let e3 = refuse(swe::Model { edges: [Edge::Wall, Edge::Outflow], ..model });
    assert!(e3.to_string().contains("Outflow"), "{e3}");
    let e4 = refuse(swe::Model { cfl: 0.4, ..model });
    assert!(e4.to_string().contains("cfl"), "{e4}");
    let mut flipped = std::fs::read(plan.path(2)).unwrap();
    let at = flipped.len() - 50;
    flipped[at] ^= 0x01;
    std::fs::write(plan.path(2), &flipped).unwrap();
    assert_eq!(refuse(model).code(), "S0407");
    std::fs::remove_dir_all(&dir).unwrap();
}
