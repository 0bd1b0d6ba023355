//! Checkpoint and restart of every model: `N` steps, a checkpoint, a restart and `N` more steps
//! give the fields of `2N` steps run straight through the model's own run function, bit for
//! bit (single domain for each model; diffusion on the distributed executor, restarted on other
//! placements; the acoustic and Euler models decomposed in `checkpoint_decomposed.rs`), and a
//! checkpoint that does not
//! fit the run (model, grid, precision, layout, settings, decomposition) or is damaged is an
//! error that says so.

mod common;

use common::{bits, interior_bits};
use std::path::PathBuf;

use stencil_examples::acoustic::{self, RegionStrategies};
use stencil_examples::checkpoint::Plan;
use stencil_examples::diffusion::{self, Setup};
use stencil_examples::euler::{Boundary, Euler};
use stencil_examples::swe::{self, circular_dam, Edge, Solver};
use stencil_runtime::io::IoError;
use stencil_runtime::{Distributed, Field, Host, Order, Overlap};

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    common::scratch("ckpt", name)
}

/// The `IoError` inside a model's boxed error.
fn io_error(e: Box<dyn std::error::Error>) -> IoError {
    match e.downcast::<IoError>() {
        Ok(e) => *e,
        Err(e) => panic!("not an I/O error: {e}"),
    }
}

fn small_setup(steps: usize, order: Order) -> Setup {
    Setup { n: [16, 14, 12], order, ..Setup::cube(16, steps) }
}

#[test]
fn diffusion_restarts_bit_for_bit() {
    let dir = scratch("diffusion");
    for (order, n, every) in [(Order::Ijk, 5, 5), (Order::Kij, 6, 4)] {
        let setup = small_setup(2 * n, order);
        let (straight, _) = diffusion::run::<Host, f32>(&Host, &setup, &Plan::none(), |_| {}).unwrap();
        let plan = Plan::every("diffusion3d", every, &dir);
        let mut seen = Vec::new();
        let (whole, start) = diffusion::run::<Host, f32>(&Host, &setup, &plan, |s| seen.push(s)).unwrap();
        assert_eq!((start, seen), (0, (1..=2 * n).collect::<Vec<_>>()));
        assert_eq!(bits(&whole), bits(&straight), "a run writing checkpoints computes what the model's run does");
        // Resume from each checkpoint written before the end.
        for at in (every..2 * n).step_by(every) {
            let path = plan.path(at);
            let mut seen = Vec::new();
            let (resumed, start) =
                diffusion::run::<Host, f32>(&Host, &setup, &plan.clone().restart_from(&path), |s| seen.push(s))
                    .unwrap();
            assert_eq!((start, seen.first().copied()), (at, Some(at + 1)));
            assert_eq!(bits(&resumed), bits(&straight), "{order:?}: restart at step {at}");
        }
        assert!(plan.path(2 * n).is_file(), "a checkpoint after the last step");
    }
    // f64 too.
    let setup = small_setup(8, Order::Ijk);
    let (straight, _) = diffusion::run::<Host, f64>(&Host, &setup, &Plan::none(), |_| {}).unwrap();
    let plan = Plan::every("diffusion3d", 3, &dir);
    diffusion::run::<Host, f64>(&Host, &setup, &plan, |_| {}).unwrap();
    let (resumed, _) =
        diffusion::run::<Host, f64>(&Host, &setup, &plan.clone().restart_from(&plan.path(3)), |_| {}).unwrap();
    assert_eq!(bits(&resumed), bits(&straight));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn decomposed_diffusion_checkpoints_and_restarts_on_any_placement() {
    // The same checkpoint code on the distributed executor: the global field, written once;
    // a restart may run on another placement (two subdomains, one domain) and give the same bits.
    let dir = scratch("diffusion-distributed");
    let setup = small_setup(10, Order::Ijk);
    let (straight, _) = diffusion::run::<Host, f64>(&Host, &setup, &Plan::none(), |_| {}).unwrap();
    let four = Distributed::host(setup.decompose(4, None).unwrap()).unwrap();
    let plan = Plan::every("diffusion3d", 5, &dir);
    let (whole, _) = diffusion::run::<_, f64>(&four, &setup, &plan, |_| {}).unwrap();
    assert_eq!(interior_bits(&whole), interior_bits(&straight));
    assert!(plan.path(5).is_file() && plan.path(10).is_file());
    let restart = plan.clone().restart_from(&plan.path(5));
    let two = Distributed::host(setup.decompose(2, None).unwrap()).unwrap().with_overlap(Overlap::OneDivided).unwrap();
    let (on_two, start) = diffusion::run::<_, f64>(&two, &setup, &restart, |_| {}).unwrap();
    assert_eq!(start, 5);
    assert_eq!(interior_bits(&on_two), interior_bits(&straight), "restart at step 5 on two subdomains");
    let (on_one, _) = diffusion::run::<Host, f64>(&Host, &setup, &restart, |_| {}).unwrap();
    assert_eq!(interior_bits(&on_one), interior_bits(&straight), "restart at step 5 on one domain");
    // A process that is not the writer (a rank other than 0) writes nothing.
    let quiet = Plan::every("quiet", 5, &dir).written_by(false);
    diffusion::run::<_, f64>(&four, &setup, &quiet, |_| {}).unwrap();
    assert!(!quiet.path(5).exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_checkpoint_that_does_not_fit_the_run_is_refused_with_what_differs() {
    let dir = scratch("mismatch");
    let setup = small_setup(4, Order::Ijk);
    let plan = Plan::every("diffusion3d", 2, &dir);
    diffusion::run::<Host, f32>(&Host, &setup, &plan, |_| {}).unwrap();
    let path = plan.path(2);
    let restart = plan.clone().restart_from(&path);
    let refuse = |setup: &Setup, f64: bool, plan: &Plan| {
        let e = if f64 {
            diffusion::run::<Host, f64>(&Host, setup, plan, |_| {}).map(drop)
        } else {
            diffusion::run::<Host, f32>(&Host, setup, plan, |_| {}).map(drop)
        };
        io_error(e.unwrap_err())
    };
    let mismatch = |e: IoError, what: &str| {
        assert_eq!(e.code(), "S0408", "{e}");
        assert!(e.to_string().contains(what), "{what} not in {e}");
        assert!(e.to_string().contains(path.to_str().unwrap()), "{e}");
    };
    mismatch(refuse(&Setup { n: [16, 14, 13], ..setup }, false, &restart), "global grid is [16, 14, 12]");
    mismatch(refuse(&setup, true, &restart), "element type of field `f` is f32, but this run's is f64");
    mismatch(refuse(&Setup { order: Order::Kij, ..setup }, false, &restart), "shape of field `f`");
    mismatch(refuse(&Setup { cfl: 0.8, ..setup }, false, &restart), "dt is");

    // Another model's checkpoint.
    let mut model = acoustic::Model::layered(12, 2);
    model.pml = 2;
    let aplan = Plan::every("acoustic3d", 2, &dir);
    acoustic::run::<Host, f32>(&Host, &RegionStrategies::default(), &model, None, &aplan, |_| {}).unwrap();
    let e = refuse(&setup, false, &plan.clone().restart_from(&aplan.path(2)));
    assert_eq!(e.code(), "S0408", "{e}");
    assert!(e.to_string().contains("model is \"acoustic3d\", but this run's is \"diffusion3d\""), "{e}");

    // Damaged files: a flipped bit, a cut, nothing at all.
    let good = std::fs::read(&path).unwrap();
    let damaged = dir.join("damaged.ckpt");
    let with = |bytes: &[u8]| {
        std::fs::write(&damaged, bytes).unwrap();
        refuse(&setup, false, &plan.clone().restart_from(&damaged))
    };
    let mut flipped = good.clone();
    let at = good.len() - 1000;
    flipped[at] ^= 0x10;
    let e = with(&flipped);
    assert_eq!(e.code(), "S0407", "{e}");
    assert!(e.to_string().contains("field `f`"), "{e}");
    let e = with(&good[..good.len() - 7]);
    assert_eq!(e.code(), "S0404", "{e}");
    let e = refuse(&setup, false, &plan.clone().restart_from(&dir.join("nothing.ckpt")));
    assert_eq!(e.code(), "S0401", "{e}");
    // A checkpoint past the run's end.
    let e = diffusion::run::<Host, f32>(&Host, &small_setup(1, Order::Ijk), &restart, |_| {}).unwrap_err();
    assert!(e.to_string().contains("past the run's last step"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn acoustic_restarts_bit_for_bit() {
    let dir = scratch("acoustic");
    let n = 6;
    let mut model = acoustic::Model::layered(24, 2 * n);
    model.pml = 5;
    let strategies = RegionStrategies::default();
    let straight = acoustic::run::<Host, f32>(&Host, &strategies, &model, None, &Plan::none(), |_| {}).unwrap();
    let plan = Plan::every("acoustic3d", n, &dir);
    let whole = acoustic::run::<Host, f32>(&Host, &strategies, &model, None, &plan, |_| {}).unwrap();
    assert_eq!(bits(&whole.last.u), bits(&straight.last.u));
    assert_eq!(whole.traces, straight.traces);
    let restart = plan.clone().restart_from(&plan.path(n));
    let resumed = acoustic::run::<Host, f32>(&Host, &strategies, &model, Some(n + 2), &restart, |_| {}).unwrap();
    let start = resumed.start;
    assert_eq!(start, n);
    assert_eq!(bits(&resumed.last.u), bits(&straight.last.u), "u after a restart at step {n}");
    assert_eq!(bits(&resumed.last.u_prev), bits(&straight.last.u_prev));
    assert_eq!(resumed.traces, straight.traces, "every step's traces, those before the restart from the checkpoint");
    assert!(straight.last.u.as_slice().iter().any(|&v| v != 0.0), "the wave has started");
    let shorter = acoustic::Model { steps: n + 2, ..model.clone() };
    let snap = acoustic::run::<Host, f32>(&Host, &strategies, &shorter, None, &Plan::none(), |_| {}).unwrap();
    assert_eq!(bits(&resumed.snapshot.unwrap().u), bits(&snap.last.u), "the snapshot after the restart");
    // Another time step is another run.
    let mut other = model.clone();
    other.dt *= 0.9;
    let e = acoustic::run::<Host, f32>(&Host, &strategies, &other, None, &restart, |_| {}).map(drop).unwrap_err();
    assert!(e.to_string().contains("dt is"), "{e}");
    // Another velocity model (the same time step) is another run too.
    let mut slower = model.clone();
    slower.layers[1].v = 2400.0;
    let e = acoustic::run::<Host, f32>(&Host, &strategies, &slower, None, &restart, |_| {}).map(drop).unwrap_err();
    assert!(e.to_string().contains("velocity model (V² Δt² per point)"), "{e}");
    // Another source position or other receivers would splice the traces of two set-ups.
    let mut moved = model.clone();
    moved.source_position = Some([1.5 * model.h, 2.0 * model.h, 3.0 * model.h]);
    let e = acoustic::run::<Host, f32>(&Host, &strategies, &moved, None, &restart, |_| {}).map(drop).unwrap_err();
    assert!(e.to_string().contains("source_x"), "{e}");
    let mut listening = model.clone();
    listening.receiver_positions = Some(vec![[0.0, 0.0, 0.0]]);
    let e = acoustic::run::<Host, f32>(&Host, &strategies, &listening, None, &restart, |_| {}).map(drop).unwrap_err();
    assert!(e.to_string().contains("receivers"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The blast wave of `euler3d` on a small grid.
fn blast(n: usize) -> (Euler, [Field<f64, 3>; 5]) {
    let mut e = Euler::cube(n, 1.0);
    e.boundaries = [Boundary::Reflective; 3];
    let q0 = e.from_primitive(|x| {
        let r2: f64 = x.iter().map(|x| (x - 0.5) * (x - 0.5)).sum();
        [1.0, 0.0, 0.0, 0.0, if r2 < 0.04 { 10.0 } else { 0.1 }]
    });
    (e, q0)
}

#[test]
fn euler_restarts_bit_for_bit() {
    let dir = scratch("euler");
    let (e, q0) = blast(12);
    let t_end = 0.03;
    for dt_every in [1, 2] {
        let (straight, steps, _) = e.run(&Host, &q0, t_end, dt_every, &Plan::none(), |_, _| {}).unwrap();
        assert!(steps > 6, "{steps} steps");
        let plan = Plan::every("euler3d", 3, &dir);
        let (whole, whole_steps, _) = e.run(&Host, &q0, t_end, dt_every, &plan, |_, _| {}).unwrap();
        assert_eq!(whole_steps, steps);
        for at in [3, 6] {
            let p = plan.path(at);
            let (resumed, resumed_steps, start) =
                e.run(&Host, &q0, t_end, dt_every, &plan.clone().restart_from(&p), |_, _| {}).unwrap();
            assert_eq!((start, resumed_steps), (at, steps));
            for v in 0..5 {
                assert_eq!(
                    interior_bits(&resumed[v]),
                    interior_bits(&straight[v]),
                    "dt_every {dt_every}, variable {v}"
                );
                assert_eq!(interior_bits(&whole[v]), interior_bits(&straight[v]));
            }
        }
    }
    // Other numerics are another model.
    let plan = Plan::every("euler3d", 3, &dir).restart_from(&dir.join("euler3d-00000003.ckpt"));
    let mut other = e;
    other.limiter = stencil_examples::euler::Limiter::Minmod;
    let err = other.run(&Host, &q0, t_end, 2, &plan, |_, _| {}).map(drop).unwrap_err();
    assert!(err.to_string().contains("Minmod") && err.to_string().contains("Koren"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn swe_restarts_bit_for_bit() {
    let dir = scratch("swe");
    let model = swe::Model { n: [24, 20], dx: [0.25; 2], edges: [Edge::Wall; 2], cfl: 0.4 };
    let q0 = model.initial(circular_dam(1.5, 2.0, 1.0));
    let t_end = 0.25;
    let mut straight = Solver::new(Host, model, &q0).unwrap();
    straight.run_until(t_end, |_| {}).unwrap();
    assert!(straight.steps >= 8, "{} steps", straight.steps);
    let plan = Plan::every("swe2d", 4, &dir);
    let (whole, _) = swe::run_with(Host, model, &q0, t_end, &plan, |_, _| {}).unwrap();
    let (resumed, start) =
        swe::run_with(Host, model, &q0, t_end, &plan.clone().restart_from(&plan.path(4)), |_, _| {}).unwrap();
    assert_eq!(start, 4);
    let (a, b, c) = (straight.state().unwrap(), whole.state().unwrap(), resumed.state().unwrap());
    assert_eq!((resumed.steps, resumed.t.to_bits()), (straight.steps, straight.t.to_bits()));
    for (x, y, z) in [(&a.h, &b.h, &c.h), (&a.hu, &b.hu, &c.hu), (&a.hv, &b.hv, &c.hv)] {
        assert_eq!(interior_bits(y), interior_bits(x));
        assert_eq!(interior_bits(z), interior_bits(x), "after a restart at step 4");
    }
    // Other boundaries are another model.
    let walls_and_outflow = swe::Model { edges: [Edge::Wall, Edge::Outflow], ..model };
    let e = swe::run_with(Host, walls_and_outflow, &q0, t_end, &plan.clone().restart_from(&plan.path(4)), |_, _| {})
        .map(drop)
        .unwrap_err();
    assert!(e.to_string().contains("Outflow"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A velocity model read from a file (`.npy` of f32 or f64, NetCDF) that holds the layered
/// model's velocities gives the layered model's run, bit for bit.
#[test]
fn acoustic_velocity_from_files_matches_the_layers() {
    use stencil_runtime::io::netcdf::{Axis, Writer};
    use stencil_runtime::io::npy;
    use stencil_runtime::{Field3, Shape3};
    let dir = scratch("velocity");
    let mut layered = acoustic::Model::layered(20, 8);
    layered.pml = 4;
    let straight =
        acoustic::run::<Host, f32>(&Host, &RegionStrategies::default(), &layered, None, &Plan::none(), |_| {}).unwrap();
    let n = layered.n;
    let p = layered.pml as isize;
    let v64 = Field3::from_fn(Shape3::new(n), |[i, j, k]| layered.velocity([i + p, j + p, k + p]));
    let v32 = Field3::from_fn(Shape3::new(n), |g| v64.get(g).unwrap() as f32);
    npy::write(dir.join("v64.npy"), &v64).unwrap();
    npy::write(dir.join("v32.npy"), &v32).unwrap();
    let mut nc = Writer::new(["x", "y", "z"].iter().zip(n).map(|(a, n)| Axis::regular(a, n, 0.0, 10.0, "m")).collect());
    nc.field("vp", &v32, "m s-1", "P-wave velocity").unwrap();
    nc.write(dir.join("v.nc")).unwrap();
    for file in ["v64.npy", "v32.npy", "v.nc"] {
        let grid = stencil_examples::velocity::read(&dir.join(file), None).unwrap();
        let model = acoustic::Model {
            velocity_grid: Some(stencil_examples::velocity::VelocityGrid(std::sync::Arc::new(grid))),
            layers: vec![acoustic::Layer { top: 0.0, v: 1.0 }],
            ..layered.clone()
        };
        assert_eq!((model.v_min(), model.v_max()), (1500.0, 2500.0));
        let run = acoustic::run::<Host, f32>(&Host, &RegionStrategies::default(), &model, None, &Plan::none(), |_| {})
            .unwrap();
        assert_eq!(bits(&run.last.u), bits(&straight.last.u), "{file}");
        assert_eq!(run.traces, straight.traces, "{file}");
    }
    // A grid of another size is refused.
    let small = Field3::from_fn(Shape3::new([4, 4, 4]), |_| 1500.0);
    let model = acoustic::Model {
        velocity_grid: Some(stencil_examples::velocity::VelocityGrid(std::sync::Arc::new(small))),
        ..layered
    };
    assert!(model.check().unwrap_err().to_string().contains("one velocity per point"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// On a GPU (a build with the `cuda` feature and a device): a restart equals the GPU's
/// uninterrupted run, bit for bit, for diffusion (single domain and two GPU subdomains) and the
/// acoustic model. Without a device it says so and checks nothing.
#[cfg(feature = "cuda")]
#[test]
fn restarts_on_a_gpu_equal_uninterrupted_gpu_runs() {
    use stencil_runtime::cuda::Gpu;
    let Ok(gpu) = Gpu::new(0) else {
        eprintln!("no GPU: the GPU restart test checks nothing here");
        return;
    };
    let dir = scratch("gpu");
    let setup = small_setup(10, Order::Kij);
    let (straight, _) = diffusion::run::<Gpu, f32>(&gpu, &setup, &Plan::none(), |_| {}).unwrap();
    let plan = Plan::every("diffusion3d", 4, &dir);
    diffusion::run::<Gpu, f32>(&gpu, &setup, &plan, |_| {}).unwrap();
    let (resumed, _) =
        diffusion::run::<Gpu, f32>(&gpu, &setup, &plan.clone().restart_from(&plan.path(4)), |_| {}).unwrap();
    assert_eq!(bits(&resumed), bits(&straight), "diffusion on a GPU, restarted at step 4");

    let domains =
        stencil_runtime::Domains::new(setup.decompose(2, None).unwrap(), vec![gpu.clone(), gpu.clone()]).unwrap();
    let two = stencil_runtime::Distributed::new(domains);
    let parts = Plan::every("diffusion3d", 4, &dir.join("parts"));
    diffusion::run::<_, f32>(&two, &setup, &parts, |_| {}).unwrap();
    let restart = parts.clone().restart_from(&parts.path(8));
    let (resumed, _) = diffusion::run::<_, f32>(&two, &setup, &restart, |_| {}).unwrap();
    assert_eq!(interior_bits(&resumed), interior_bits(&straight), "two GPU subdomains, restarted at step 8");

    let mut model = acoustic::Model::layered(24, 12);
    model.pml = 5;
    let strategies = RegionStrategies::default();
    let straight = acoustic::run::<Gpu, f32>(&gpu, &strategies, &model, None, &Plan::none(), |_| {}).unwrap();
    let plan = Plan::every("acoustic3d", 6, &dir);
    acoustic::run::<Gpu, f32>(&gpu, &strategies, &model, None, &plan, |_| {}).unwrap();
    let restart = plan.clone().restart_from(&plan.path(6));
    let resumed = acoustic::run::<Gpu, f32>(&gpu, &strategies, &model, None, &restart, |_| {}).unwrap();
    assert_eq!(bits(&resumed.last.u), bits(&straight.last.u), "acoustic on a GPU, restarted at step 6");
    assert_eq!(resumed.traces, straight.traces);
    std::fs::remove_dir_all(&dir).unwrap();
}
