//! The four decomposed models over MPI ranks (feature `mpi`; CI runs it under `mpiexec -n 1`,
//! `-n 2` and `-n 4`): diffusion and the 25-point acoustic update with PML (f32, every overlap
//! mode; for the acoustic model the fields, snapshot and every receiver trace), Euler (f64,
//! periodic, reflective and outflow axes; its steps also sized on the executors, the held
//! scalars folded between the ranks) and the 2D shallow water model (walls, outflow and
//! periodic edges; every time step too), each with one and two subdomains per rank, equal bit
//! for bit on rank 0 to the single-domain run on the host; and decomposed diffusion, acoustic,
//! Euler and shallow water runs on host subdomains that checkpoint (each rank writing its
//! subdomains' parts) and restart from the parts, equal to the single-domain run too; and the
//! column model (column sweeps) on whole columns split across the ranks. A difference panics,
//! which makes `mpiexec` end every rank with the message.

use stencil_examples::acoustic::{self, Model, RegionStrategies};
use stencil_examples::diffusion::{self, Setup};
use stencil_examples::euler::{Boundary, Euler, Riemann, Scheme};
use stencil_examples::swe::{self, Edge, Solver};
use stencil_runtime::{Decomposition, Distributed, Domains, Executor, Host, Order, Overlap, World};

/// Bits of a field's storage, widened to f64 (exact for f32, signed zeros included).
fn bits<T: Copy + Into<f64>>(v: &[T]) -> Vec<u64> {
    v.iter().map(|&x| x.into().to_bits()).collect()
}

/// How many values differ in their bits (a count, not the values: fields are long).
fn differing<T: Copy + Into<f64>>(a: &[T], b: &[T]) -> usize {
    assert_eq!(a.len(), b.len(), "lengths differ");
    bits(a).iter().zip(bits(b)).filter(|(x, y)| **x != *y).count()
}

/// This rank's subdomains of a decomposition, each on an executor `exec(global index)`, with
/// the transport between ranks [`Attach`] gives.
fn domains<E: Attach, const D: usize>(world: &World, d: Decomposition<D>, exec: &dyn Fn(usize) -> E) -> Domains<E, D> {
    let per_rank = d.len() / world.size();
    let first = world.rank() * per_rank;
    E::attach(Domains::over_ranks(world.clone(), d, (first..first + per_rank).map(exec).collect()).expect("domains"))
}

/// Whether GPU subdomains move messages between ranks through NCCL (else host-staged).
#[cfg(feature = "nccl")]
static NCCL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The transport of an executor's domains: host-staged MPI, or NCCL for GPUs while [`NCCL`] is set.
trait Attach: Executor + Sized {
    fn attach<const D: usize>(d: Domains<Self, D>) -> Domains<Self, D> {
        d
    }
}

impl Attach for Host {}

#[cfg(feature = "cuda")]
impl Attach for stencil_runtime::cuda::Gpu {
    #[cfg(feature = "nccl")]
    fn attach<const D: usize>(d: Domains<Self, D>) -> Domains<Self, D> {
        use stencil_runtime::Transport;
        if !NCCL.load(std::sync::atomic::Ordering::Relaxed) {
            return d;
        }
        let d = d.with_transport(Transport::Nccl).unwrap_or_else(|e| panic!("NCCL transport: {e}"));
        assert_eq!(d.transport(), Transport::Nccl);
        d
    }
}

fn diffusion<E: Attach>(world: &World, per_rank: usize, exec: &dyn Fn(usize) -> E) {
    use stencil_examples::checkpoint::Plan;
    let setup = Setup { n: [14, 11, 9], order: Order::Ijk, ..Setup::cube(14, 6) };
    let d = setup.decompose(world.size() * per_rank, None).unwrap();
    let (single, _) = diffusion::run::<Host, f32>(&Host, &setup, &Plan::none(), |_| {}).unwrap();
    // The model's one code path on the distributed executor, in both overlap modes: every rank
    // downloads the global field.
    for mode in [Overlap::None, Overlap::OneDivided] {
        let on = Distributed::new(domains(world, d, exec)).with_overlap(mode).unwrap();
        let (split, _) = diffusion::run::<_, f32>(&on, &setup, &Plan::none(), |_| {}).unwrap();
        let what = format!("diffusion over grid {:?}, {mode:?}, rank {}", d.grid(), world.rank());
        assert_eq!(differing(split.as_slice(), single.as_slice()), 0, "{what}");
    }
}

/// Checkpoints over ranks: rank 0 writes the global field, then every rank restarts from it; both
/// runs end with the single-domain run's field on every rank.
fn diffusion_checkpoint<E: Attach>(world: &World, per_rank: usize, exec: &dyn Fn(usize) -> E) {
    use stencil_examples::checkpoint::Plan;
    let setup = Setup { n: [14, 11, 9], order: Order::Ijk, ..Setup::cube(14, 8) };
    let d = setup.decompose(world.size() * per_rank, None).unwrap();
    let (single, _) = diffusion::run::<Host, f64>(&Host, &setup, &Plan::none(), |_| {}).unwrap();
    let dir = std::env::temp_dir().join(format!("stencil-ranks-checkpoint-{}-{per_rank}", world.size()));
    if world.rank() == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    }
    world.sum(0.0); // every rank waits for the clean-up
    let plan = Plan::every("diffusion3d", 3, &dir).written_by(world.rank() == 0);
    let on = Distributed::new(domains(world, d, exec));
    let (whole, _) = diffusion::run::<_, f64>(&on, &setup, &plan, |_| {}).unwrap();
    world.sum(0.0); // the checkpoints are written
    let restart = plan.clone().restart_from(&plan.path(6));
    let (resumed, start) = diffusion::run::<_, f64>(&on, &setup, &restart, |_| {}).unwrap();
    assert_eq!(start, 6);
    let what = format!("diffusion checkpoints over grid {:?}, rank {}", d.grid(), world.rank());
    let interior = |f: &stencil_runtime::Field3<f64>| f.interior_view().iter().copied().collect::<Vec<f64>>();
    assert_eq!(differing(&interior(&whole), &interior(&single)), 0, "{what}");
    assert_eq!(differing(&interior(&resumed), &interior(&single)), 0, "{what}: restarted at step 6");
    world.sum(0.0);
    if world.rank() == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A fresh checkpoint folder for `name` shared by every rank (rank 0 clears it, the others
/// wait).
fn checkpoint_dir(world: &World, name: &str, per_rank: usize) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("stencil-ranks-{name}-{}-{per_rank}", world.size()));
    if world.rank() == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    }
    world.sum(0.0); // every rank waits for the clean-up
    dir
}

/// The acoustic run with checkpoints on the distributed executor over ranks: rank 0 writes the
/// global state, then every rank restarts from it; both end with the single-domain run's fields
/// and traces on every rank.
fn acoustic_checkpoint<E: Attach>(world: &World, per_rank: usize, exec: &dyn Fn(usize) -> E) {
    use stencil_examples::checkpoint::Plan;
    let mut m = Model::layered(17, 12);
    m.n = [17, 15, 16];
    m.pml = 4;
    m.f0 = 25.0;
    m.source = [8, 7, 4];
    m.receiver_depth = 2;
    let d = m.decompose(world.size() * per_rank, None).unwrap();
    let s = RegionStrategies::default();
    let reference = acoustic::run::<Host, f32>(&Host, &s, &m, None, &Plan::none(), |_| {}).unwrap();
    let dir = checkpoint_dir(world, "acoustic", per_rank);
    let plan = Plan::every("acoustic3d", 6, &dir).written_by(world.rank() == 0);
    let on = Distributed::new(domains(world, d, exec));
    let whole = acoustic::run::<_, f32>(&on, &s, &m, None, &plan, |_| {}).unwrap();
    world.sum(0.0); // the checkpoints are written
    let restart = plan.clone().restart_from(&plan.path(6));
    let resumed = acoustic::run::<_, f32>(&on, &s, &m, None, &restart, |_| {}).unwrap();
    let start = resumed.start;
    assert_eq!(start, 6);
    {
        let what = format!("acoustic checkpoints over grid {:?}, rank {}", d.grid(), world.rank());
        for (out, when) in [(&whole, "straight"), (&resumed, "restarted at step 6")] {
            assert_eq!(differing(out.last.u.as_slice(), reference.last.u.as_slice()), 0, "{what}, {when}: u");
            assert_eq!(differing(out.last.u_prev.as_slice(), reference.last.u_prev.as_slice()), 0, "{what}, {when}");
            let (a, b): (Vec<f32>, Vec<f32>) = (out.traces.concat(), reference.traces.concat());
            assert_eq!(differing(&a, &b), 0, "{what}, {when}: traces");
        }
    }
    world.sum(0.0);
    if world.rank() == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The decomposed Euler run with checkpoints over ranks (periodic, reflective and outflow axes,
/// the CFL step computed every other step), restarted from the parts.
fn euler_checkpoint<E: Attach>(world: &World, per_rank: usize, exec: &dyn Fn(usize) -> E) {
    use stencil_examples::checkpoint::Plan;
    let mut e = Euler::cube(8, 1.0);
    e.n = [10, 9, 8];
    e.h = e.n.map(|n| 1.0 / n as f64);
    e.boundaries = [Boundary::Periodic, Boundary::Reflective, Boundary::Outflow];
    let q0 = e.from_primitive(|[x, y, z]| {
        let r2 = (x - 0.4).powi(2) + (y - 0.55).powi(2) + (z - 0.5).powi(2);
        [1.0 + 0.1 * y, 0.4 - 0.3 * y, 0.3 * x - 0.2, 0.3 * z - 0.1, if r2 < 0.06 { 5.0 } else { 0.5 }]
    });
    let d = e.decompose(world.size() * per_rank, None).unwrap();
    let t_end = 0.02;
    let (single, steps, _) =
        e.run(&Host, &q0, t_end, 2, &stencil_examples::checkpoint::Plan::none(), |_, _| {}).unwrap();
    assert!(steps > 3, "{steps} steps");
    let dir = checkpoint_dir(world, "euler", per_rank);
    let plan = Plan::every("euler3d", 3, &dir).written_by(world.rank() == 0);
    let on = Distributed::new(domains(world, d, exec));
    let (whole, whole_steps, _) = e.run(&on, &q0, t_end, 2, &plan, |_, _| {}).unwrap();
    world.sum(0.0); // the checkpoints are written
    let restart = plan.clone().restart_from(&plan.path(3));
    let (resumed, resumed_steps, start) = e.run(&on, &q0, t_end, 2, &restart, |_, _| {}).unwrap();
    let what = format!("euler checkpoints over grid {:?}, rank {}", d.grid(), world.rank());
    assert_eq!((whole_steps, resumed_steps, start), (steps, steps, 3), "{what}");
    let cells = |q| {
        let mut out = Vec::new();
        e.for_each_cell(q, |_, c| out.extend(c));
        out
    };
    assert_eq!(differing(&cells(&whole), &cells(&single)), 0, "{what}");
    assert_eq!(differing(&cells(&resumed), &cells(&single)), 0, "{what}: restarted at step 3");
    world.sum(0.0);
    if world.rank() == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn acoustic<E: Attach>(world: &World, per_rank: usize, exec: &dyn Fn(usize) -> E) {
    use stencil_examples::checkpoint::Plan;
    let mut m = Model::layered(19, 40);
    m.n = [19, 17, 18];
    m.pml = 4;
    m.f0 = 25.0;
    m.source = [9, 8, 5];
    m.receiver_depth = 2;
    let d = m.decompose(world.size() * per_rank, None).unwrap();
    let s = RegionStrategies::default();
    let reference = acoustic::run::<Host, f32>(&Host, &s, &m, Some(20), &Plan::none(), |_| {}).unwrap();
    assert!(reference.traces.iter().flatten().any(|v| *v != 0.0), "the wave reached no receiver");
    // The single-domain run, unchanged, on the distributed executor over the ranks (every rank
    // gets the fields and the traces).
    for overlap in [Overlap::None, Overlap::OneDivided, Overlap::Auto] {
        let on = Distributed::new(domains(world, d, exec)).with_overlap(overlap).unwrap();
        let out = acoustic::run::<_, f32>(&on, &s, &m, Some(20), &Plan::none(), |_| {}).unwrap();
        let what = format!("acoustic run on the executor over grid {:?}, {overlap:?}, rank {}", d.grid(), world.rank());
        assert_eq!(differing(out.last.u.as_slice(), reference.last.u.as_slice()), 0, "{what}: final u");
        let (a, b) = (out.snapshot.unwrap(), reference.snapshot.as_ref().unwrap());
        assert_eq!(differing(a.u.as_slice(), b.u.as_slice()), 0, "{what}: snapshot");
        for (step, (a, b)) in out.traces.iter().zip(&reference.traces).enumerate() {
            assert_eq!(differing(a, b), 0, "{what}: receivers after step {}", step + 1);
        }
    }
}

fn euler<E: Attach>(world: &World, per_rank: usize, exec: &dyn Fn(usize) -> E) {
    // The split scheme and the fused one, on the distributed executor in both overlap modes, and
    // each step sized on the executors (the rate and the clock reduced into held scalars, folded
    // between the ranks: on the host, or on the streams through NCCL) against the host's sizing.
    let runs = [
        (Scheme::Split, Overlap::None, false),
        (Scheme::Fused, Overlap::None, false),
        (Scheme::Fused, Overlap::OneDivided, false),
        (Scheme::Fused, Overlap::None, true),
    ];
    for (scheme, overlap, on_device) in runs {
        let mut e = Euler::cube(8, 1.0);
        e.n = [10, 9, 8];
        e.h = e.n.map(|n| 1.0 / n as f64);
        e.boundaries = [Boundary::Periodic, Boundary::Reflective, Boundary::Outflow];
        e.scheme = scheme;
        e.riemann = Riemann::Hllc;
        let q0 = e.from_primitive(|[x, y, z]| {
            let r2 = (x - 0.4).powi(2) + (y - 0.55).powi(2) + (z - 0.5).powi(2);
            let p = if r2 < 0.06 { 5.0 } else { 0.5 };
            [1.0 + 0.2 * (6.0 * x).sin() * (5.0 * z).cos() + 0.1 * y, 0.4 - 0.3 * y, -0.2 + 0.3 * x, 0.3 * z - 0.1, p]
        });
        let d = e.decompose(world.size() * per_rank, None).unwrap();
        let t_end = 0.02;
        let (single, steps, _) =
            e.run(&Host, &q0, t_end, 1, &stencil_examples::checkpoint::Plan::none(), |_, _| {}).unwrap();
        let on = Distributed::new(domains(world, d, exec)).with_overlap(overlap).unwrap();
        e.dt_on_device = on_device;
        let (q, steps_x, _) =
            e.run(&on, &q0, t_end, 1, &stencil_examples::checkpoint::Plan::none(), |_, _| {}).unwrap();
        let cells = |q| {
            let mut out = Vec::new();
            e.for_each_cell(q, |_, c| out.extend(c));
            out
        };
        let what = format!(
            "euler {scheme:?} {overlap:?} (steps sized on the executors: {on_device}) over grid {:?}",
            d.grid()
        );
        let what = format!("{what}, run on the executor, rank {}", world.rank());
        assert_eq!((differing(&cells(&q), &cells(&single)), steps_x), (0, steps), "{what}");
    }
}

/// A perturbed dam break off the centre of a small uneven basin with the edges given and a
/// flow that crosses them.
fn dam_break(edges: [Edge; 2]) -> (swe::Model, swe::State<stencil_runtime::Field2<f64>>) {
    let model = swe::Model { n: [15, 13], dx: [0.3, 0.25], edges, cfl: 0.45 };
    let q0 = model.initial(|[x, y]| {
        let dam = if (x - 0.4).powi(2) + (y + 0.3).powi(2) < 1.5 { 2.0 } else { 1.0 };
        let h = dam + 0.05 * (2.0 * x).sin() * (3.0 * y).cos() + 0.02 * (7.0 * x * y).sin();
        [h, h * (0.3 - 0.2 * y), h * (0.15 * x - 0.25)]
    });
    (model, q0)
}

/// The interior values of `h`, `hu` and `hv`.
fn swe_cells(q: &swe::State<stencil_runtime::Field2<f64>>) -> Vec<f64> {
    [&q.h, &q.hu, &q.hv].into_iter().flat_map(|f| f.interior_view().iter().copied().collect::<Vec<_>>()).collect()
}

/// The shallow water model's `Solver` on the distributed executor over the ranks (walls and
/// periodic, outflow and periodic edges): every time step and the cells on every rank equal the
/// single-domain run's.
fn swe<E: Attach>(world: &World, per_rank: usize, exec: &dyn Fn(usize) -> E) {
    for edges in [[Edge::Wall, Edge::Periodic], [Edge::Periodic, Edge::Outflow]] {
        let (model, q0) = dam_break(edges);
        let t_end = 0.3;
        let mut single = Solver::new(Host, model, &q0).unwrap();
        let mut dts = Vec::new();
        while swe::running(single.t, t_end) {
            dts.push(single.cfl_step(Some(t_end)).unwrap().to_bits());
        }
        let d = model.decompose(world.size() * per_rank, None).unwrap();
        let what = format!("swe {edges:?} over grid {:?}", d.grid());
        let mut split = Solver::new(Distributed::new(domains(world, d, exec)), model, &q0).unwrap();
        let mut dts_d = Vec::new();
        while swe::running(split.t, t_end) {
            dts_d.push(split.cfl_step(Some(t_end)).unwrap().to_bits());
        }
        assert!(dts.len() > 3, "{what}: {} steps", dts.len());
        assert_eq!(dts_d, dts, "{what}: time steps");
        let q = split.state().unwrap();
        assert_eq!(differing(&swe_cells(&q), &swe_cells(&single.state().unwrap())), 0, "{what}");
    }
}

/// The shallow water run with checkpoints on the distributed executor over ranks: rank 0 writes
/// the global state, every rank restarts from it.
fn swe_checkpoint<E: Attach>(world: &World, per_rank: usize, exec: &dyn Fn(usize) -> E) {
    use stencil_examples::checkpoint::Plan;
    let (model, q0) = dam_break([Edge::Periodic, Edge::Wall]);
    let t_end = 0.3;
    let mut single = Solver::new(Host, model, &q0).unwrap();
    single.run_until(t_end, |_| {}).unwrap();
    assert!(single.steps > 3, "{} steps", single.steps);
    let d = model.decompose(world.size() * per_rank, None).unwrap();
    let dir = checkpoint_dir(world, "swe", per_rank);
    let plan = Plan::every("swe2d", 3, &dir).written_by(world.rank() == 0);
    let on = Distributed::new(domains(world, d, exec));
    let (whole, _) = swe::run_with(on.clone(), model, &q0, t_end, &plan, |_, _| {}).unwrap();
    world.sum(0.0); // the checkpoints are written
    let restart = plan.clone().restart_from(&plan.path(3));
    let (resumed, start) = swe::run_with(on, model, &q0, t_end, &restart, |_, _| {}).unwrap();
    let what = format!("swe checkpoints over grid {:?}", d.grid());
    assert_eq!(
        (whole.steps, resumed.steps, start, whole.t.to_bits(), resumed.t.to_bits()),
        (single.steps, single.steps, 3, single.t.to_bits(), single.t.to_bits()),
        "{what}"
    );
    let reference = swe_cells(&single.state().unwrap());
    assert_eq!(differing(&swe_cells(&whole.state().unwrap()), &reference), 0, "{what}");
    assert_eq!(differing(&swe_cells(&resumed.state().unwrap()), &reference), 0, "{what}: restarted at step 3");
    world.sum(0.0);
    if world.rank() == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The column model (column sweeps) over ranks: whole columns split across x, each rank
/// stepping its own subdomains, which exchange nothing; every subdomain equals its part of the
/// single-domain run bit for bit, on every rank.
fn column<E: Attach>(world: &World, per_rank: usize, exec: &dyn Fn(usize) -> E) {
    use stencil_examples::column::{moist_bubble, Column};
    let (n, dz, dt) = ([4 * world.size() * per_rank + 3, 9, 20], 100.0, 5.0);
    let initial = moist_bubble(n, dz);
    let mut single = Column::new(&Host, &initial, 20.0, dz).unwrap();
    let d = Decomposition::new(n, [world.size() * per_rank, 1, 1], [false; 3], [0, 0, 1]).unwrap();
    let on = Distributed::new(domains(world, d, exec));
    let mut column = Column::new(&on, &initial, 20.0, dz).unwrap();
    for _ in 0..30 {
        single.step(&Host, dt).unwrap();
        column.step(&on, dt).unwrap();
    }
    for (name, got, want) in [
        ("t", &column.state.t, &single.state.t),
        ("qv", &column.state.qv, &single.state.qv),
        ("qc", &column.state.qc, &single.state.qc),
        ("qr", &column.state.qr, &single.state.qr),
    ] {
        let got = on.download(got).unwrap();
        let what = format!("column model, rank {}: {name}", world.rank());
        assert_eq!(differing(got.as_slice(), want.as_slice()), 0, "{what}");
    }
}

fn main() {
    let universe = mpi::initialize().expect("MPI_Init failed");
    let world = World::mpi(universe.world());
    world.abort_on_panic();
    for per_rank in [1, 2] {
        diffusion(&world, per_rank, &|_| Host);
        diffusion_checkpoint(&world, per_rank, &|_| Host);
        acoustic(&world, per_rank, &|_| Host);
        acoustic_checkpoint(&world, per_rank, &|_| Host);
        euler(&world, per_rank, &|_| Host);
        euler_checkpoint(&world, per_rank, &|_| Host);
        swe(&world, per_rank, &|_| Host);
        swe_checkpoint(&world, per_rank, &|_| Host);
        column(&world, per_rank, &|_| Host);
    }
    #[allow(unused_mut)]
    let mut on = "host subdomains".to_string();
    // With the cuda feature and a GPU: subdomain i on GPU i % count, messages staged through the
    // host between ranks, against the same single-domain host runs.
    #[cfg(feature = "cuda")]
    if let Ok(count @ 1..) = stencil_runtime::cuda::Gpu::count() {
        let gpu = |i: usize| stencil_runtime::cuda::Gpu::new(i % count).expect("a GPU");
        for per_rank in [1, 2] {
            diffusion(&world, per_rank, &gpu);
            acoustic(&world, per_rank, &gpu);
            euler(&world, per_rank, &gpu);
        }
        on = format!("host subdomains and subdomains on {count} GPU(s)");
        // NCCL between ranks, one subdomain per rank, each on a GPU of its own (in one process it
        // carries only the held minima and maxima of Euler's steps sized on the executors).
        #[cfg(feature = "nccl")]
        if world.size() <= count {
            NCCL.store(true, std::sync::atomic::Ordering::Relaxed);
            diffusion(&world, 1, &gpu);
            acoustic(&world, 1, &gpu);
            euler(&world, 1, &gpu);
            NCCL.store(false, std::sync::atomic::Ordering::Relaxed);
            on += " (host-staged, and NCCL with one GPU per rank)";
        }
    }
    if world.rank() == 0 {
        println!(
            "ranks_models: {} rank(s), {on}: diffusion, acoustic, euler and swe (each on host subdomains with \
             checkpoints and a restart too), and the column model, equal the single domain bit for bit",
            world.size()
        );
    }
}
