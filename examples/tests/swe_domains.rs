//! The shallow water model over host subdomains (its one `Solver` on the distributed executor)
//! equals the single-domain run bit for bit: a
//! small grid of odd sizes (13×11 cells, so most splits below are uneven) with walls, outflow and
//! periodic edges (a periodic axis split or not: unsplit, the exchange wraps it onto the
//! subdomain itself), a perturbed dam break that moves in every direction, run a few CFL steps
//! (the last one shortened) over several process grids, 1×N and N×1 included. Every cell of
//! `h`, `hu`, `hv`, the step count and every time step must agree to the bit.

use stencil_examples::swe::{Edge, Model, Solver, State, SweStage, HALO};
use stencil_runtime::{Distributed, Field2, HaloWidths, Host, Overlap};

const N: [usize; 2] = [13, 11];

/// Process grids: one domain, 1×N and N×1, and splits along both axes (13 = 7 + 6 = 5 + 4 + 4
/// = 3 + 3 + 3 + 2 + 2, 11 = 6 + 5 = 4 + 4 + 3 = 3 + 3 + 3 + 2).
const GRIDS: [[usize; 2]; 8] = [[1, 1], [2, 1], [1, 2], [5, 1], [1, 4], [3, 2], [2, 3], [4, 3]];

/// Edges: walls, outflow and periodic on either axis, and a fully periodic basin.
const EDGES: [[Edge; 2]; 5] = [
    [Edge::Wall, Edge::Wall],
    [Edge::Periodic, Edge::Wall],
    [Edge::Outflow, Edge::Periodic],
    [Edge::Wall, Edge::Outflow],
    [Edge::Periodic, Edge::Periodic],
];

fn model(edges: [Edge; 2]) -> Model {
    Model { n: N, dx: [0.3, 0.25], edges, cfl: 0.45 }
}

/// A dam break off the centre with a pseudo-random perturbation of the depth and a flow that
/// crosses every edge: nothing symmetric, so a misplaced halo shows.
fn initial(m: &Model, seed: u64) -> State<Field2<f64>> {
    let noise = move |[x, y]: [f64; 2], k: u64| {
        // A hash of the position and the seed, in [-0.5, 0.5).
        let mut z = (x.to_bits() ^ y.to_bits().rotate_left(17) ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)) ^ k;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as f64 / u64::MAX as f64 - 0.5
    };
    m.initial(|p @ [x, y]| {
        let dam = if (x - 0.4).powi(2) + (y + 0.3).powi(2) < 1.2 { 2.0 } else { 1.0 };
        let h = dam + 0.1 * noise(p, 1) + 0.05 * (2.0 * x).sin() * (3.0 * y).cos();
        [h, h * (0.3 - 0.2 * y + 0.05 * noise(p, 2)), h * (-0.25 + 0.15 * x + 0.05 * noise(p, 3))]
    })
}

/// The bits of the interior cells of `h`, `hu`, `hv`.
fn bits(q: &State<Field2<f64>>) -> Vec<u64> {
    let mut out = Vec::new();
    for f in [&q.h, &q.hu, &q.hv] {
        for j in 0..N[1] as isize {
            for i in 0..N[0] as isize {
                out.push(f.get([i, j]).expect("interior").to_bits());
            }
        }
    }
    out
}

/// A run's final cells and the bits of every time step.
type Run = (Vec<u64>, Vec<u64>);

/// About `steps` CFL steps of the initial state (not a multiple of the step: the last one is
/// shortened) on one domain.
fn single(m: Model, q0: &State<Field2<f64>>, steps: f64) -> (Run, f64) {
    // The first CFL step, from a solver of its own.
    let t_end = steps * Solver::new(Host, m, q0).unwrap().cfl_step(None).unwrap();
    let mut solver = Solver::new(Host, m, q0).unwrap();
    let mut dts = Vec::new();
    while stencil_examples::swe::running(solver.t, t_end) {
        dts.push(solver.cfl_step(Some(t_end)).unwrap().to_bits());
    }
    ((bits(&solver.state().unwrap()), dts), t_end)
}

/// The single-domain `Solver` on the distributed executor over `grid`.
fn decomposed(m: Model, grid: [usize; 2], q0: &State<Field2<f64>>, t_end: f64) -> Run {
    let d = m.decompose(grid.iter().product(), Some(grid)).unwrap();
    assert_eq!(d.grid(), grid);
    let overlap = if grid[0].is_multiple_of(2) { Overlap::OneDivided } else { Overlap::None };
    let mut solver = Solver::new(Distributed::host(d).unwrap().with_overlap(overlap).unwrap(), m, q0).unwrap();
    let mut dts = Vec::new();
    while stencil_examples::swe::running(solver.t, t_end) {
        dts.push(solver.cfl_step(Some(t_end)).unwrap().to_bits());
    }
    (bits(&solver.state().unwrap()), dts)
}

#[test]
fn host_subdomains_equal_the_single_domain_bit_for_bit() {
    let mut runs = 0;
    for (seed, edges) in EDGES.into_iter().enumerate() {
        let m = model(edges);
        let q0 = initial(&m, seed as u64);
        let ((cells, dts), t_end) = single(m, &q0, 6.4);
        assert!(dts.len() >= 6, "{edges:?}: {} steps", dts.len());
        for grid in GRIDS {
            let (cells_d, dts_d) = decomposed(m, grid, &q0, t_end);
            let what = format!("{edges:?} grid {grid:?}");
            let bad = cells.iter().zip(&cells_d).filter(|(a, b)| a != b).count();
            eprintln!("{what}: {} steps (single domain {}), {bad} values differ", dts_d.len(), dts.len());
            assert_eq!(bad, 0, "{what}: cells differ from the single-domain run");
            assert_eq!(dts_d, dts, "{what}: time steps");
            runs += 1;
        }
    }
    assert_eq!(runs, EDGES.len() * GRIDS.len());
}

#[test]
fn run_until_and_after_step_agree_with_the_single_domain() {
    // `run_until` (what swe2d calls) and the times it reports, walls on x, periodic y split in 3.
    let m = model([Edge::Wall, Edge::Periodic]);
    let q0 = initial(&m, 7);
    let t_end = 0.2;
    let mut single = Solver::new(Host, m, &q0).unwrap();
    let mut times = Vec::new();
    single.run_until(t_end, |s| times.push((s.steps, s.t.to_bits()))).unwrap();
    let exec = Distributed::host(m.decompose(6, Some([2, 3])).unwrap()).unwrap();
    let mut split = Solver::new(exec, m, &q0).unwrap();
    let mut times_d = Vec::new();
    split.run_until(t_end, |s| times_d.push((s.steps, s.t.to_bits()))).unwrap();
    assert!(times.len() > 3, "{} steps", times.len());
    assert_eq!(times_d, times);
    let q = split.state().unwrap();
    assert_eq!(bits(&q), bits(&single.state().unwrap()));
    // Mass is conserved by walls and periodic edges alike.
    let (m0, m1) = (m.mass(&q0), m.mass(&q));
    assert!(((m1 - m0) / m0).abs() < 1e-13, "mass {m0} -> {m1}");
}

#[test]
fn halo_is_the_stencils_reach() {
    // SweStage reads every field of its input two cells out along each axis (SweSpeed at the cell).
    let reach = ["h", "hu", "hv"].iter().try_fold(HaloWidths::none(), |w, f| w.read_by::<SweStage>(f)).unwrap();
    assert_eq!(reach.0, [HALO; 2]);
}

#[test]
fn decompositions_that_do_not_fit_are_refused_with_a_reason() {
    let walls = model([Edge::Wall, Edge::Wall]);
    let q0 = initial(&walls, 1);
    let err = |d: stencil_runtime::Decomposition<2>| {
        Solver::new(Distributed::host(d).unwrap(), walls, &q0).err().map(|e| e.to_string()).unwrap()
    };
    // Another grid.
    let other = Model { n: [12, 11], ..walls };
    let e = err(other.decompose(2, None).unwrap());
    assert!(e.contains("[12, 11]") && e.contains("whole grid"), "{e}");
    // A periodic axis that is not the model's: the walls its fields declare along it are refused.
    let periodic = model([Edge::Periodic, Edge::Wall]);
    let e = err(periodic.decompose(2, None).unwrap());
    assert!(e.contains("declare_boundary") && e.contains("makes periodic"), "{e}");
    // Subdomains thinner than the halo, and a grid of the wrong count.
    let e = walls.decompose(7, Some([7, 1])).unwrap_err().to_string();
    assert!(e.contains("axis 0"), "{e}");
    assert!(walls.decompose(4, Some([3, 1])).is_err());
}
