//! Scaling over GPUs: weak (a fixed block per GPU) and strong (one global grid) scaling of the
//! 7-point diffusion update and the 25-point acoustic update (f32), split along z over P GPUs,
//! in every overlap mode of `CompCommBinder`, with the per-step breakdown:
//! - the update alone, and the exchange alone (also as GB/s: the bytes every subdomain sends per
//!   exchange, pack and unpack included in the time);
//! - the exchange's phases alone: pack, transfer (host staging included) and unpack, each timed
//!   with this process's GPUs synchronised around it (`HaloExchange::exchange_timed`, the mean
//!   of 20). Under MPI the ranks are not synchronised between phases, so a rank's transfer also
//!   holds its wait for the peer's pack;
//! - the one-divided update without the exchange: what splitting the range into an inner region
//!   and slabs costs by itself;
//! - each mode's step, whose excess over the update alone is the exchange time it leaves exposed.
//!
//! Wall clock per step over `--steps` steps after a warm-up, every GPU synchronised (under MPI:
//! the slowest rank). "vs 1 GPU" needs the one-GPU run in the same process, so it is shown for
//! `--gpus 1,...` runs only.
//!
//! In one process: `scaling --gpus 1,2` (subdomain i on GPU i; peer copies between GPUs). Under
//! `mpiexec -n R` (build with `--features mpi`, or `nccl`): R subdomains, one per rank, on GPU
//! rank % count; messages between ranks as `STENCIL_TRANSPORT` says (`mpi`: host-staged,
//! `nccl`), so each transport is one run. `--csv DIR` writes, per model and scaling, the
//! breakdown of the largest P in the form `scripts/plot-overlap` draws.

use stencil_bench::{Acoustic25, Diffusion7};
use stencil_examples::placement::Processes;
use stencil_runtime::cuda::Gpu;
use stencil_runtime::prelude::*;
use stencil_runtime::{
    CompCommBinder, Decomposition, DeviceField3, Distributed, Domains, ErasedField, HaloExchange, HaloWidths, Halos,
    Overlap, PhaseTimes, World,
};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The models measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Model {
    /// 7-point diffusion, f32, halo 1: two fields, the new one's halo exchanged.
    Diffusion,
    /// 25-point acoustic leapfrog, f32, halo 4: u, u_prev, v² and u_next, u_next's halo exchanged.
    Acoustic,
}

impl Model {
    fn reach(self) -> [usize; 3] {
        match self {
            Model::Diffusion => [1; 3],
            Model::Acoustic => [4; 3],
        }
    }

    /// Fields per subdomain; the first `fields - 1` rotate (the last is the coefficient field).
    fn fields(self) -> usize {
        match self {
            Model::Diffusion => 2,
            Model::Acoustic => 4,
        }
    }
}

/// Times of one configuration, ms per step.
struct Breakdown {
    update: f64,
    exchange: f64,
    /// Bytes all subdomains send per exchange.
    bytes: f64,
    /// The one-divided step without its exchange: the update split into inner region and slabs.
    divided: f64,
    /// The exchange's phases alone (ms, the slowest rank's), from `exchange_timed`.
    phases: PhaseTimes,
    modes: Vec<(Overlap, f64)>,
}

impl Breakdown {
    fn best(&self) -> (Overlap, f64) {
        self.modes.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1)).expect("three modes")
    }
}

/// Runs `model` on `domains` (fields of `global` points split as the decomposition says).
fn measure(model: Model, domains: &Domains<Gpu, 3>, steps: usize) -> Res<Breakdown> {
    let d = domains.decomposition();
    let reach = model.reach();
    let like = Shape3::new(d.global()).halo(reach[0]);
    let ranges: Vec<_> = domains.subdomains().map(|s| Loop3D::interior(&s.shape(&like))).collect();
    // Fields: smooth values, the same on every subdomain layout.
    let mut state: Vec<Vec<DeviceField3<f32>>> = Vec::new();
    for s in domains.subdomains() {
        let exec = domains.exec(domains.local_index(s.index).expect("local"));
        let shape = s.shape(&like);
        let mut fields = Vec::new();
        for f in 0..model.fields() {
            let host = Field3::from_fn(shape, |[i, j, k]| {
                if f == model.fields() - 1 && model == Model::Acoustic {
                    0.1
                } else {
                    (i * 7 + j * 13 + k * 3 + f as isize).rem_euclid(101) as f32 * 1e-2
                }
            });
            fields.push(exec.upload(&host)?);
        }
        state.push(fields);
    }
    let mut ex = HaloExchange::new(domains);
    ex.append::<f32>("u", HaloWidths(reach));
    let coefficients = [0.1f32, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4];
    let written = model.fields() - if model == Model::Acoustic { 2 } else { 1 };
    let read = if model == Model::Acoustic { 1 } else { 0 };
    let world = domains.world().clone();
    let bytes = world.sum(ex.bytes_sent()? as f64);
    let mut time = |mode: Overlap, exchange: bool, update: bool| -> Res<f64> {
        let binder = CompCommBinder::new(domains, ranges.clone(), reach, mode)?;
        let mut fill = |st: &mut Vec<Vec<DeviceField3<f32>>>, halos: Halos| {
            if !exchange {
                return Ok(());
            }
            let which = if halos == Halos::Read { read } else { written };
            ex.exchange(&mut st.iter_mut().map(|f| vec![ErasedField::of(&mut f[which])]).collect::<Vec<_>>())
        };
        let step = |exec: &Gpu, i: usize, range: &Loop3D, st: &mut Vec<Vec<DeviceField3<f32>>>| {
            if !update {
                return Ok(());
            }
            let f = &mut st[i];
            match model {
                Model::Diffusion => {
                    let [a, b] = f.get_disjoint_mut([0, 1]).expect("two fields");
                    let c = coefficients;
                    exec.run(range, Diffusion7, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &*a, b))
                }
                Model::Acoustic => {
                    let [prev, u, next, v2] = f.get_disjoint_mut([0, 1, 2, 3]).expect("four fields");
                    exec.run(range, Acoustic25, (0.1f32, &*u, &*prev, &*v2, next))
                }
            }
        };
        let rotate = |st: &mut Vec<Vec<DeviceField3<f32>>>| {
            for f in st.iter_mut() {
                f[..model.fields() - if model == Model::Acoustic { 1 } else { 0 }].rotate_left(1);
            }
        };
        binder.prime(&mut state, &mut fill)?;
        for _ in 0..3 {
            binder.step(domains, &mut state, &mut fill, step)?;
            rotate(&mut state);
        }
        domains.synchronize()?;
        world.sum(0.0);
        let start = std::time::Instant::now();
        for _ in 0..steps {
            binder.step(domains, &mut state, &mut fill, step)?;
            rotate(&mut state);
        }
        domains.synchronize()?;
        Ok(world.max(start.elapsed().as_secs_f64() * 1e3 / steps as f64))
    };
    let update = time(Overlap::None, false, true)?;
    let exchange = time(Overlap::None, true, false)?;
    let divided = time(Overlap::OneDivided, false, true)?;
    let mut modes = Vec::new();
    for mode in Overlap::ALL {
        modes.push((mode, time(mode, true, true)?));
    }
    // The phases of the exchange, each with every executor synchronised around it.
    let reps = 20;
    let mut phases = PhaseTimes::default();
    for _ in 0..reps {
        let t =
            ex.exchange_timed(&mut state.iter_mut().map(|f| vec![ErasedField::of(&mut f[read])]).collect::<Vec<_>>())?;
        phases.pack += t.pack / reps as f64;
        phases.transfer += t.transfer / reps as f64;
        phases.unpack += t.unpack / reps as f64;
    }
    let phases = PhaseTimes {
        pack: world.max(phases.pack),
        transfer: world.max(phases.transfer),
        unpack: world.max(phases.unpack),
    };
    Ok(Breakdown { update, exchange, bytes, divided, phases, modes })
}

/// The same model written once against `E: Executor` (no exchange, no subdomain in its code):
/// ms per step on `exec` after a warm-up, every GPU synchronised. On the distributed executor
/// the field read at offsets is stale after each step, so every step exchanges it first.
fn written_once<E: Executor>(model: Model, exec: &E, global: [usize; 3], steps: usize, world: &World) -> Res<f64> {
    let reach = model.reach();
    let like = Shape3::new(global).halo(reach[0]);
    let interior = Loop3D::interior(&like);
    let c = [0.1f32, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4];
    // Zero fields (allocated on the executor: no global host field of the weak runs' size); the
    // launches and the exchanges move the same bytes as with other values.
    let (mut a, mut b, mut next, v2) = (exec.alloc(like)?, exec.alloc(like)?, exec.alloc(like)?, exec.alloc(like)?);
    let mut step = |exec: &E| -> Result<(), LaunchError> {
        match model {
            Model::Diffusion => {
                exec.run(&interior, Diffusion7, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &a, &mut b))?;
                std::mem::swap(&mut a, &mut b);
            }
            Model::Acoustic => {
                // a = u_prev, b = u: next from both, then rotate.
                exec.run(&interior, Acoustic25, (0.1f32, &b, &a, &v2, &mut next))?;
                std::mem::swap(&mut a, &mut b);
                std::mem::swap(&mut b, &mut next);
            }
        }
        Ok(())
    };
    // Warm-up: compiles, tunes, and lets `Overlap::Auto` try its modes.
    for _ in 0..10 {
        step(exec)?;
    }
    exec.synchronize()?;
    world.sum(0.0);
    let start = std::time::Instant::now();
    for _ in 0..steps {
        step(exec)?;
    }
    exec.synchronize()?;
    Ok(world.max(start.elapsed().as_secs_f64() * 1e3 / steps as f64))
}

/// Command line (the module docs say what is measured).
#[derive(clap::Parser)]
#[command(about = "Weak and strong scaling over GPUs, every overlap mode, with the per-step breakdown")]
struct Args {
    /// GPU counts in one process (ignored under mpiexec: one subdomain per rank).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    gpus: Vec<usize>,
    /// Points per axis of the block per GPU (weak scaling).
    #[arg(long, default_value_t = 512)]
    weak: usize,
    /// Global grids of the strong-scaling runs, NXxNYxNZ (or N for a cube).
    #[arg(long, value_delimiter = ',', default_value = "512,512x512x1024")]
    strong: Vec<String>,
    /// Models: diffusion, acoustic.
    #[arg(long, value_delimiter = ',', default_value = "diffusion,acoustic")]
    models: Vec<String>,
    /// Timed steps per configuration.
    #[arg(long, default_value_t = 50)]
    steps: usize,
    /// Write the breakdown of the largest P per model and scaling into this folder.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
    /// The process grid: `z` (every subdomain a slab along z) or `auto` (the grid
    /// `Decomposition::auto` picks, cut along several axes; weak: the block per GPU repeated
    /// along each).
    #[arg(long, default_value = "z")]
    grid: String,
}

/// The targets of a bench run on `p` GPUs over the global grid `g`: weak efficiency with 512³ per
/// GPU, or strong speed-up of one 512³ grid (`None`: no target for this run).
fn target(model: Model, kind: &str, p: usize, g: [usize; 3], grid: [usize; 3]) -> Option<f64> {
    let per_gpu: [usize; 3] = std::array::from_fn(|a| g[a] / grid[a].max(1));
    if (kind == "weak" && per_gpu != [512; 3]) || (kind != "weak" && g != [512; 3]) {
        return None;
    }
    match (kind, p, model) {
        ("weak", 2..=4, _) => Some(0.97),
        ("strong", 2, _) => Some(1.85),
        ("strong", 4, Model::Diffusion) => Some(3.0),
        ("strong", 4, Model::Acoustic) => Some(3.5),
        _ => None,
    }
}

fn parse_extent(s: &str) -> Res<[usize; 3]> {
    let v: Vec<usize> = s.split('x').map(|p| p.trim().parse()).collect::<Result<_, _>>()?;
    match v[..] {
        [n] => Ok([n; 3]),
        [x, y, z] => Ok([x, y, z]),
        _ => Err(format!("`{s}`: give N or NXxNYxNZ").into()),
    }
}

fn main() -> Res<()> {
    let args = <Args as clap::Parser>::parse();
    let processes = Processes::start()?;
    let ranks = processes.world().size();
    let count = Gpu::count()?;
    let counts = if ranks > 1 { vec![ranks] } else { args.gpus.clone() };
    if let Some(&p) = counts.iter().find(|&&p| p > count && ranks == 1) {
        return Err(format!("--gpus {p}: this machine has {count} GPU(s)").into());
    }
    // This rank's own GPU (as `gpu_domains` places it), not GPU 0 on every rank.
    let name = Gpu::new(processes.world().rank() % count.max(1))?.name().to_string();
    println!(
        "scaling: {ranks} process(es), {count} GPU(s) visible per process ({name}), {} steps per line",
        args.steps
    );
    println!(
        "\n| model | scaling | global grid | GPUs | transport | update only | exchange only (GB/s) | pack / transfer / unpack (µs) | split, no exchange | none | one-divided | two-divided | best | vs 1 GPU | exchange hidden (best) |"
    );
    println!("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|");
    let mut executor_rows = Vec::new();
    for m in &args.models {
        let model = match m.as_str() {
            "diffusion" => Model::Diffusion,
            "acoustic" => Model::Acoustic,
            other => return Err(format!("model `{other}`: use diffusion or acoustic").into()),
        };
        // Weak: the block per GPU stacked along z; strong: one global grid.
        let mut configs: Vec<(&str, Option<[usize; 3]>)> = vec![("weak", None)];
        for s in &args.strong {
            configs.push(("strong", Some(parse_extent(s)?)));
        }
        for &(kind, fixed) in &configs {
            let auto = match args.grid.as_str() {
                "z" => false,
                "auto" => true,
                other => return Err(format!("--grid {other}: use z or auto").into()),
            };
            // The process grid of `p` subdomains, and the global grid.
            let cut = |p: usize| -> Res<[usize; 3]> {
                Ok(if auto {
                    Decomposition::auto([args.weak; 3], p, [false; 3], model.reach())?.grid()
                } else {
                    [1, 1, p]
                })
            };
            let global = |p: usize| -> Res<[usize; 3]> {
                Ok(fixed.unwrap_or(if auto {
                    cut(p)?.map(|c| c * args.weak)
                } else {
                    [args.weak, args.weak, args.weak * p]
                }))
            };
            let mut base: Option<f64> = None;
            let mut csv = String::from("configuration,update_ms,exposed_ms\n");
            for &p in &counts {
                let g = global(p)?;
                let d = if auto {
                    Decomposition::auto(g, p, [false; 3], model.reach())?
                } else {
                    Decomposition::new(g, [1, 1, p], [false; 3], model.reach())?
                };
                let domains = if ranks > 1 {
                    processes.gpu_domains(d, "scaling")?
                } else {
                    Domains::new(d, (0..p).map(Gpu::new).collect::<Result<_, _>>()?)?
                };
                // In one process, also with a host thread per GPU issuing its work.
                let mut variants = vec![domains.clone()];
                if ranks == 1 && p > 1 {
                    variants.push(domains.clone().with_host_threads()?);
                }
                for domains in variants {
                    let transport = if ranks > 1 {
                        domains.transport().to_string()
                    } else if p > 1 {
                        if domains.host_threads() {
                            "peer copies, host threads"
                        } else {
                            "peer copies, one host thread"
                        }
                        .into()
                    } else {
                        "-".into()
                    };
                    let b = measure(model, &domains, args.steps)?;
                    let (mode, best) = b.best();
                    let world = domains.world().clone();
                    let plain = if p == 1 && ranks == 1 {
                        Some(written_once(model, &domains.exec(0).clone(), g, args.steps, &world)?)
                    } else {
                        None
                    };
                    let dist = |mode: Overlap| Distributed::new(domains.clone()).with_overlap(mode);
                    let none = written_once(model, &dist(Overlap::None)?, g, args.steps, &world)?;
                    let one = written_once(model, &dist(Overlap::OneDivided)?, g, args.steps, &world)?;
                    let auto = written_once(model, &dist(Overlap::Auto)?, g, args.steps, &world)?;
                    let fastest = none.min(one).min(auto);
                    executor_rows.push(format!(
                    "| {m} | {kind} | {} | {p} | {transport} | {} | {none:.3} | {one:.3} | {auto:.3} | {best:.3} ({mode:?}) | {:.1}% |",
                    g.map(|v| v.to_string()).join("×"),
                    plain.map_or("-".into(), |t| format!("{t:.3} ({:+.1}%)", 100.0 * (fastest / t - 1.0))),
                    100.0 * best / fastest
                ));
                    if p == 1 {
                        base = Some(best);
                    }
                    let versus = match (base, kind) {
                        (Some(t1), "weak") => format!("{:.1}% efficiency", 100.0 * t1 / best),
                        (Some(t1), _) => format!("{:.2}x ({:.1}% of {p}x)", t1 / best, 100.0 * t1 / best / p as f64),
                        (None, _) => "(1 GPU: its own run)".into(),
                    };
                    let versus = match (base, target(model, kind, p, g, d.grid())) {
                        (Some(t1), Some(goal)) => {
                            let got = t1 / best;
                            let shown =
                                if kind == "weak" { format!("{:.0}%", 100.0 * goal) } else { format!("{goal:.2}x") };
                            format!("{versus}; target ≥ {shown}: {}", if got >= goal { "met" } else { "missed" })
                        }
                        _ => versus,
                    };
                    let hidden = if b.exchange > 0.0 && p > 1 {
                        format!("{:.0}%", 100.0 * (1.0 - ((best - b.update).max(0.0) / b.exchange)).clamp(0.0, 1.0))
                    } else {
                        "-".into()
                    };
                    println!(
                    "| {m} | {kind} | {} | {p} | {transport} | {:.3} | {:.3}{} | {:.0} / {:.0} / {:.0} | {:.3} | {:.3} | {:.3} | {:.3} | {mode:?} | {versus} | {hidden} |",
                    g.map(|v| v.to_string()).join("×"),
                    b.update,
                    b.exchange,
                    if b.bytes > 0.0 { format!(" ({:.0})", b.bytes / (b.exchange * 1e-3) / 1e9) } else { String::new() },
                    b.phases.pack * 1e3,
                    b.phases.transfer * 1e3,
                    b.phases.unpack * 1e3,
                    b.divided,
                    b.modes[0].1,
                    b.modes[1].1,
                    b.modes[2].1
                );
                    csv = format!(
                        "configuration,update_ms,exposed_ms\nupdate only,{:.5},0\nexchange only,0,{:.5}\n",
                        b.update, b.exchange
                    );
                    for (mode, t) in &b.modes {
                        csv.push_str(&format!("{mode:?},{:.5},{:.5}\n", b.update, (t - b.update).max(0.0)));
                    }
                }
            }
            if let (Some(dir), 0) = (&args.csv, processes.world().rank()) {
                std::fs::create_dir_all(dir)?;
                let p = counts.last().copied().unwrap_or(1);
                let file = dir
                    .join(format!("{m}-{kind}-{}-{p}gpu-{ranks}rank.csv", global(p)?.map(|v| v.to_string()).join("x")));
                std::fs::write(&file, &csv)?;
            }
        }
    }
    println!(
        "\nThe same models written once for any executor, run by the distributed executor (automatic halos), ms per \
         step; \"plain GPU\" is the plain GPU executor on one GPU (the distributed executor's best against it); \
         \"binder best\" is the hand-written CompCommBinder step above; \"speed vs binder\" is binder time over the \
         executor's best (of none, one-divided and auto):\n"
    );
    println!("| model | scaling | global grid | GPUs | transport | plain GPU | executor, none | executor, one-divided | executor, auto | binder best | speed vs binder |");
    println!("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|");
    for row in &executor_rows {
        println!("{row}");
    }
    Ok(())
}
