//! The acoustic model over subdomains equals the single-domain run bit for bit: the one `run`
//! on the distributed executor (the regions, inner and six PML slabs, cut by the subdomain
//! boundaries; the source on the subdomain that owns it; the receivers read from the parts that
//! own them; the halos of `u` and `eta` exchanged when the stencils read them). Host subdomains
//! over several process grids (uneven splits, subdomains that hold only PML, a source next to a
//! subdomain boundary); with `--features cuda`, GPU subdomains against the host's single-domain
//! run.

use stencil_examples::acoustic::{run, AcousticInner, AcousticPml, Model, Outcome, RegionStrategies, Wave};
use stencil_examples::checkpoint::Plan;
use stencil_runtime::{Decomposition, Distributed, HaloWidths, Host, Overlap};

/// A small layered model (uneven sizes, the grid 33 x 31 x 32 with the PML) whose wavefront
/// reaches the PML and crosses the subdomain boundaries of every grid below within the run.
fn model() -> Model {
    let mut m = Model::layered(23, 90);
    m.n = [23, 21, 22];
    m.pml = 5;
    m.f0 = 20.0;
    // Next to the middle of every axis: near a subdomain boundary of the 2- and 3-way splits.
    m.source = [11, 10, 6];
    m.receiver_depth = 2;
    m
}

/// Process grids: splits along each axis, several axes, uneven parts, subdomains that hold only
/// PML (6 along x: the first, x in 0..6, is the left slab and a bit; the last one the right slab).
const GRIDS: [[usize; 3]; 6] = [[1, 1, 2], [2, 1, 1], [2, 2, 1], [3, 1, 2], [6, 1, 1], [1, 3, 2]];

/// Bit equality (widening to `f64` is exact and keeps every bit of an `f32`, signed zeros included).
fn same<T: Wave>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| Into::<f64>::into(*x).to_bits() == Into::<f64>::into(*y).to_bits())
}

/// Asserts that `out` is `reference` bit for bit: final fields, snapshot, every trace.
fn assert_same<T: Wave>(what: &str, out: &Outcome<T>, reference: &Outcome<T>) {
    assert!(same(out.last.u.as_slice(), reference.last.u.as_slice()), "{what}: final u differs");
    assert!(same(out.last.u_prev.as_slice(), reference.last.u_prev.as_slice()), "{what}: final u_prev differs");
    let (snap, snap_ref) = (out.snapshot.as_ref().unwrap(), reference.snapshot.as_ref().unwrap());
    assert!(same(snap.u.as_slice(), snap_ref.u.as_slice()), "{what}: snapshot differs");
    assert_eq!(out.traces.len(), reference.traces.len(), "{what}: steps recorded");
    for (s, (a, b)) in out.traces.iter().zip(&reference.traces).enumerate() {
        assert!(same(a, b), "{what}: receivers differ after step {}", s + 1);
    }
}

fn host_grids<T: Wave>() {
    let m = model();
    let snapshot = Some(m.steps / 2);
    let reference = run::<Host, T>(&Host, &RegionStrategies::default(), &m, snapshot, &Plan::none(), |_| {}).unwrap();
    let max = reference.last.u.as_slice().iter().fold(0.0f64, |a, v| a.max((*v).into().abs()));
    let p = m.pml as isize;
    let corner: f64 = reference.last.u.get([p / 2, p / 2, p / 2]).unwrap().into();
    let trace_max = reference.traces.iter().flatten().fold(0.0f64, |a, v| a.max((*v).into().abs()));
    assert!(max > 0.0 && corner != 0.0 && trace_max > 0.0, "the wavefront has not reached the PML corner");
    for (g, grid) in GRIDS.into_iter().enumerate() {
        let d = m.decompose(grid.iter().product(), Some(grid)).unwrap();
        let overlap = [Overlap::None, Overlap::OneDivided, Overlap::TwoDivided][g % 3];
        let exec = Distributed::host(d).unwrap().with_overlap(overlap).unwrap();
        let out = run::<_, T>(&exec, &RegionStrategies::default(), &m, snapshot, &Plan::none(), |_| {}).unwrap();
        assert_same(&format!("grid {grid:?}, {overlap:?}"), &out, &reference);
    }
    // The automatic grid as well.
    let d = m.decompose(4, None).unwrap();
    let out =
        run::<_, T>(&Distributed::host(d).unwrap(), &RegionStrategies::default(), &m, snapshot, &Plan::none(), |_| {})
            .unwrap();
    assert_same(&format!("auto grid {:?}", d.grid()), &out, &reference);
}

#[test]
fn host_subdomains_equal_the_single_domain_run_f32() {
    host_grids::<f32>();
}

#[test]
fn host_subdomains_equal_the_single_domain_run_f64() {
    host_grids::<f64>();
}

#[test]
fn the_halo_covers_the_stencils_reach() {
    // The 25-point star reads u 4 points around; grad eta reads eta 1 point around.
    assert_eq!(HaloWidths::of::<AcousticInner<f32>>("u").unwrap().0, [4; 3]);
    assert_eq!(HaloWidths::of::<AcousticPml<f32>>("eta").unwrap().0, [1; 3]);
    assert!(model().shape().halo_widths().iter().all(|&h| h >= 4));
}

#[test]
fn bad_decompositions_are_errors() {
    let m = model();
    let e = m.decompose(4, Some([2, 1, 1])).unwrap_err();
    assert!(e.to_string().contains("not the 4 asked for"), "{e}");
    let e = m.decompose(12, Some([12, 1, 1])).unwrap_err();
    assert!(e.to_string().contains("thinner than the halo"), "{e}");
    assert!(m.decompose(0, None).is_err());
    // A decomposition of another grid is refused when the state is allocated.
    let global = m.shape().interior();
    let wrong = Decomposition::new([global[0] - 1, global[1], global[2]], [2, 1, 1], [false; 3], [4; 3]).unwrap();
    let e = run::<_, f32>(
        &Distributed::host(wrong).unwrap(),
        &RegionStrategies::default(),
        &m,
        None,
        &Plan::none(),
        |_| {},
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("whole grid"), "{e}");
}

/// GPU subdomains (subdomain i on GPU i % count) against the host's single-domain run.
#[cfg(feature = "cuda")]
#[test]
fn gpu_subdomains_equal_the_host_single_domain_run() {
    use stencil_runtime::cuda::Gpu;
    use stencil_runtime::{Executor, Strategy};
    let count = match Gpu::count() {
        Ok(n) if n > 0 => n,
        Ok(_) => {
            eprintln!("skipping: no GPU");
            return;
        }
        Err(e) => {
            eprintln!("skipping: no GPU ({e})");
            return;
        }
    };
    let m = model();
    let snapshot = Some(m.steps / 2);
    let reference = run::<Host, f32>(&Host, &RegionStrategies::default(), &m, snapshot, &Plan::none(), |_| {}).unwrap();
    let strategies = [None, Some(Strategy::ZMarch { block_x: 32, block_y: 4, points_per_thread: 16 })];
    for grid in [[2, 1, 1], [2, 2, 1], [3, 1, 2], [6, 1, 1]] {
        let d = m.decompose(grid.iter().product(), Some(grid)).unwrap();
        let gpus: Vec<Gpu> = (0..d.len()).map(|i| Gpu::new(i % count).unwrap()).collect();
        eprintln!("grid {grid:?} on {}", gpus[0].describe());
        let domains = stencil_runtime::Domains::new(d, gpus).unwrap();
        for strategy in strategies {
            let s = RegionStrategies::uniform(strategy);
            let exec = Distributed::new(domains.clone()).with_overlap(Overlap::OneDivided).unwrap();
            let out = run::<_, f32>(&exec, &s, &m, snapshot, &Plan::none(), |_| {}).unwrap();
            assert_same(&format!("grid {grid:?} on {count} GPU(s), {strategy:?}"), &out, &reference);
        }
        // The single-domain `run`, unchanged, on the same GPUs through the distributed executor,
        // each subdomain's work issued from a host thread of its own.
        let threaded = domains.clone().with_host_threads().unwrap();
        for overlap in [Overlap::None, Overlap::OneDivided, Overlap::Auto] {
            let exec = stencil_runtime::Distributed::new(threaded.clone()).with_overlap(overlap).unwrap();
            let out = run::<_, f32>(&exec, &RegionStrategies::default(), &m, snapshot, &Plan::none(), |_| {}).unwrap();
            let what = format!("run on the executor, grid {grid:?}, {count} GPU(s), {overlap:?}, host threads");
            assert_same(&what, &out, &reference);
        }
        eprintln!("grid {grid:?}: the single-domain run on the distributed executor is bit-equal to the host");
    }
}

/// The halo traffic of a step: `u` is exchanged once per step (the region launches read it, none
/// writes it), `eta` never (uploaded current, read around a point, never written).
#[test]
fn a_step_exchanges_u_once() {
    let mut m = model();
    m.steps = 6;
    let d = m.decompose(4, Some([2, 2, 1])).unwrap();
    let exec = Distributed::host(d).unwrap();
    run::<_, f32>(&exec, &RegionStrategies::default(), &m, None, &Plan::none(), |_| {}).unwrap();
    // Uploaded fields are current: the first step exchanges nothing, every later one `u` (the
    // previous step wrote it, as `u_prev`, before the swap).
    assert_eq!(exec.exchanges(), m.steps - 1, "exchanges in {} steps", m.steps);
}
