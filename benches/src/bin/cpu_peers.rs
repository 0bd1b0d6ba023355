//! Our side of the CPU side-by-side benchmark (`benches/cpu-peers/run` drives it next to
//! pystencils and Devito), and the thread-scaling table.
//!
//! The problems (the same ones `benches/cpu-peers/peers.py` gives the peers):
//! - **S1**, 7-point diffusion `f_new = 0.4 f + 0.1 (6 neighbours)` on `n³` (2D: 5-point,
//!   `0.6 f + 0.1 (4 neighbours)` on `n2²`), halo 1 held at zero, `f` and `f_new` swapped each step.
//! - **S2**, the 8th-order acoustic update `u_next = 2u - u_prev + c v2 lap(u)` (25-point star in
//!   3D, 17-point in 2D), `c = 1e-8`, `v2 = 1500²` (a field), halo 4 held at zero, three
//!   buffers rotating.
//! - Initial values `s(1) + 0.5 s(3)` with `s(m) = Π_axes sin(π m (i + 1) / (n + 1))`, computed
//!   in f64 and rounded to the precision: no denormals appear.
//!
//! ```text
//! cpu_peers [--case s1,s2] [--prec f32,f64] [--dims 3,2] [--n 256] [--n2 4096] [--steps 50]
//!           [--runs 5] [--fma] [--dump DIR] [--triad] [--scaling 1,2,4,8,16]
//! ```
//! Prints one JSON line per (case, dims, precision): the median and every timed run (one untimed
//! warm-up run first; the fields are re-initialised, untimed, before every run) and GPts/s;
//! `--triad` prints the STREAM triad (`a = b + s c`, 3 × 2^26 f32, counted 12 B per element, best
//! of 10) instead; `--scaling` runs S1 and S2 3D f32 and the triad on rayon pools of each thread
//! count and prints a table; `--dump DIR` writes every final field (interior, `i` fastest) for the
//! peers' check.

use rayon::prelude::*;
use std::time::Instant;
use stencil_bench::*;
use stencil_runtime::field::Element;
use stencil_runtime::prelude::*;
use stencil_runtime::{HostTiling, Loop};

/// Options.
#[derive(clap::Parser)]
#[command(about = "Our side of the CPU side-by-side benchmark (S1 diffusion, S2 acoustic), JSON lines")]
struct Opts {
    /// Problems to run (s1, s2).
    #[arg(long = "case", value_delimiter = ',', default_value = "s1,s2")]
    cases: Vec<String>,
    /// Precisions (f32, f64).
    #[arg(long = "prec", value_delimiter = ',', default_value = "f32")]
    precs: Vec<String>,
    /// Dimensions (3, 2).
    #[arg(long, value_delimiter = ',', default_value = "3")]
    dims: Vec<usize>,
    /// Points per axis in 3D.
    #[arg(long, default_value_t = 256)]
    n: usize,
    /// Points per axis in 2D.
    #[arg(long, default_value_t = 4096)]
    n2: usize,
    /// Time steps per timed run.
    #[arg(long, default_value_t = 50)]
    steps: usize,
    /// Timed runs (the best counts).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Alignment of the rows' first interior cell, in elements (default: the shape's, 32).
    #[arg(long)]
    align: Option<usize>,
    /// Steps per pass over the grid (temporal blocking, `Host::run_steps_with` and
    /// `Host::run_leapfrog_with`; default: one step per launch, as the peers run).
    #[arg(long)]
    pass_steps: Option<usize>,
    /// Planes per stage of a pass (default: chosen from the cache sizes).
    #[arg(long, default_value_t = 0)]
    planes: usize,
    /// Rows per band of a pass (3D; default 0: chosen, bands only where a slab of whole planes
    /// does not fit in the cache).
    #[arg(long, default_value_t = 0)]
    rows: usize,
    /// Write the final fields into this directory (for checking against the peers).
    #[arg(long)]
    dump: Option<String>,
    /// Print the STREAM triad bandwidth only.
    #[arg(long)]
    triad: bool,
    /// Our stencils with their products fused (`#[stencil(fma)]`), as the peers' C compilers fuse
    /// them on their own; reported as `stencil+fma`.
    #[arg(long)]
    fma: bool,
    /// Print how many threads' worth of arithmetic the threads run at once only (a probe for
    /// windows where a virtual machine's CPUs share cores): with a dependent chain and with wide
    /// independent arithmetic (which threads sharing a core, SMT siblings, split).
    #[arg(long)]
    probe: bool,
    /// The thread-scaling table for these thread counts instead (e.g. 1,2,4,8,16).
    #[arg(long, value_delimiter = ',')]
    scaling: Option<Vec<usize>>,
    /// No JSON lines (the scaling table prints instead).
    #[arg(skip)]
    quiet: bool,
}

/// The initial value at interior point `p` of an `n`-point-per-axis grid.
fn initial(p: &[isize], n: usize) -> f64 {
    let s =
        |m: f64| p.iter().map(|&i| (std::f64::consts::PI * m * (i + 1) as f64 / (n + 1) as f64).sin()).product::<f64>();
    s(1.0) + 0.5 * s(3.0)
}

/// The timed runs after a warm-up: `run(true)` re-initialises (untimed), `run(false)` runs the
/// time loop.
fn time_runs(runs: usize, mut run: impl FnMut(bool)) -> Vec<f64> {
    run(true);
    run(false);
    (0..runs)
        .map(|_| {
            run(true);
            let t = Instant::now();
            run(false);
            t.elapsed().as_secs_f64()
        })
        .collect()
}

/// Prints the JSON line of a case (unless quiet) and returns its GPts/s.
fn report(o: &Opts, case: &str, dims: usize, prec: &str, n: usize, times: &[f64]) -> f64 {
    let points = (n as f64).powi(dims as i32) * o.steps as f64;
    let med = median(times.to_vec());
    let isa = stencil_runtime::cpu::isa().name();
    let gpts = points / med / 1e9;
    if o.quiet {
        return gpts;
    }
    let who = format!(
        "stencil{}{}",
        if o.fma { "+fma" } else { "" },
        o.pass_steps.map_or(String::new(), |k| format!("+pass{k}"))
    );
    let ts: Vec<String> = times.iter().map(|t| format!("{t:.5}")).collect();
    println!(
        "{{\"who\": \"{who}\", \"case\": \"{case}\", \"dims\": {dims}, \"prec\": \"{prec}\", \"n\": {n}, \"steps\": {}, \
         \"threads\": {}, \"isa\": \"{isa}\", \"median_s\": {med:.5}, \"times\": [{}], \"gpts\": {gpts:.4}}}",
        o.steps,
        rayon::current_num_threads(),
        ts.join(", "),
    );
    gpts
}

fn dump<T: Element, const D: usize>(o: &Opts, name: &str, f: &Field<T, D>) {
    let Some(dir) = &o.dump else { return };
    let values = f.read_range(&Loop::interior(f.shape())).expect("interior");
    // SAFETY: element types are plain scalars; the bytes are written as they lie in memory.
    let bytes = unsafe { std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(&values[..])) };
    std::fs::create_dir_all(dir).expect("dump dir");
    std::fs::write(format!("{dir}/{name}.bin"), bytes).expect("dump");
}

/// Runs S1 and S2 of one precision and dimensionality.
macro_rules! cases {
    ($fn_name:ident, $t:ty, $prec:literal, $dims:literal, $shape:ident, $range:ident,
     $diff:expr, |$c:ident, $f:ident, $g:ident| $diff_args:expr, $star:expr) => {
        fn $fn_name(o: &Opts) -> Vec<f64> {
            let mut gpts = Vec::new();
            let n = if $dims == 3 { o.n } else { o.n2 };
            let ic = |halo: usize| {
                let s = $shape::new([n; $dims]).halo(halo);
                let s = o.align.map_or(s, |a| s.align(a));
                Field::<$t, $dims>::from_fn(s, |g| {
                    if g.iter().all(|&i| i >= 0 && (i as usize) < n) {
                        initial(&g, n) as $t
                    } else {
                        0.0
                    }
                })
            };
            if o.cases.iter().any(|c| c == "s1") {
                let init = ic(1);
                let (mut $f, mut $g) = (init.clone(), init.clone());
                let range = $range::interior(init.shape());
                let $c: ($t, $t) = (0.1, if $dims == 3 { 0.4 } else { 0.6 });
                let times = time_runs(o.runs, |setup| {
                    if setup {
                        $f.as_mut_slice().copy_from_slice(init.as_slice());
                        $g.as_mut_slice().copy_from_slice(init.as_slice());
                        return;
                    }
                    let tiling = o.pass_steps.map(|k| HostTiling::new(k).planes(o.planes).rows(o.rows));
                    Host.run_steps_with(&range, $diff, o.steps, tiling, (&mut $f, &mut $g), &(), |$f, $g, _| {
                        $diff_args
                    })
                    .expect("launch");
                });
                gpts.push(report(o, "s1", $dims, $prec, n, &times));
                dump(o, &format!("s1_{}d_{}", $dims, $prec), &$f);
            }
            if o.cases.iter().any(|c| c == "s2") {
                let init = ic(4);
                let v2 = Field::<$t, $dims>::filled(*init.shape(), 1500.0 * 1500.0);
                let (mut up, mut u, mut un) = (init.clone(), init.clone(), init.clone());
                let range = $range::interior(init.shape());
                let c: $t = 1e-8;
                let times = time_runs(o.runs, |setup| {
                    if setup {
                        up.as_mut_slice().copy_from_slice(init.as_slice());
                        u.as_mut_slice().copy_from_slice(init.as_slice());
                        return;
                    }
                    let tiling = o.pass_steps.map(|k| HostTiling::new(k).planes(o.planes).rows(o.rows));
                    let levels = (&mut up, &mut u, &mut un);
                    Host.run_leapfrog_with(&range, $star, o.steps, tiling, levels, &v2, |u, up, un, v2| {
                        (c, u, up, v2, un)
                    })
                    .expect("launch");
                });
                gpts.push(report(o, "s2", $dims, $prec, n, &times));
                dump(o, &format!("s2_{}d_{}", $dims, $prec), &u);
            }
            gpts
        }
    };
}

cases!(
    run_3d_f32,
    f32,
    "f32",
    3,
    Shape3,
    Loop3D,
    Diffusion7,
    |c, f, g| (c.0, c.0, c.0, c.0, c.0, c.0, c.1, f, g),
    Acoustic25
);
cases!(
    run_3d_f64,
    f64,
    "f64",
    3,
    Shape3,
    Loop3D,
    Diffusion7F64,
    |c, f, g| (c.0, c.0, c.0, c.0, c.0, c.0, c.1, f, g),
    Acoustic25F64
);
cases!(run_2d_f32, f32, "f32", 2, Shape2, Loop2D, Diffusion5, |c, f, g| (c.0, c.1, f, g), Acoustic17);
cases!(run_2d_f64, f64, "f64", 2, Shape2, Loop2D, Diffusion5F64, |c, f, g| (c.0, c.1, f, g), Acoustic17F64);
cases!(
    run_3d_f32_fma,
    f32,
    "f32",
    3,
    Shape3,
    Loop3D,
    Diffusion7Fma,
    |c, f, g| (c.0, c.0, c.0, c.0, c.0, c.0, c.1, f, g),
    Acoustic25Fma
);
cases!(
    run_3d_f64_fma,
    f64,
    "f64",
    3,
    Shape3,
    Loop3D,
    Diffusion7F64Fma,
    |c, f, g| (c.0, c.0, c.0, c.0, c.0, c.0, c.1, f, g),
    Acoustic25F64Fma
);
cases!(run_2d_f32_fma, f32, "f32", 2, Shape2, Loop2D, Diffusion5Fma, |c, f, g| (c.0, c.1, f, g), Acoustic17Fma);
cases!(run_2d_f64_fma, f64, "f64", 2, Shape2, Loop2D, Diffusion5F64Fma, |c, f, g| (c.0, c.1, f, g), Acoustic17F64Fma);

/// STREAM triad `a = b + 3 c` on 3 × 2^26 f32 (ordinary stores), GB/s counting 12 B per
/// element, best of 10 after one warm-up.
fn triad() -> f64 {
    let len = 1 << 26;
    let (b, c) = (vec![1.0f32; len], vec![2.0f32; len]);
    let mut a = vec![0.0f32; len];
    let chunk = len.div_ceil(rayon::current_num_threads() * 4);
    let mut best = f64::INFINITY;
    for run in 0..11 {
        let t = Instant::now();
        a.par_chunks_mut(chunk).zip(b.par_chunks(chunk)).zip(c.par_chunks(chunk)).for_each(|((a, b), c)| {
            for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
                *a = b + 3.0 * c;
            }
        });
        if run > 0 {
            best = best.min(t.elapsed().as_secs_f64());
        }
    }
    std::hint::black_box(&a);
    12.0 * len as f64 / best / 1e9
}

/// Seconds for `threads` threads at once to each run `work` (no memory traffic): the best of 5.
fn at_once(threads: usize, work: impl Fn() + Sync) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(&work);
                }
            });
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// A chain of dependent arithmetic: each step waits for the one before.
fn chain() {
    let mut x = std::hint::black_box(1.0f64);
    for _ in 0..20_000_000 {
        x = x.mul_add(0.999_999_9, 1e-9);
    }
    std::hint::black_box(x);
}

/// 128 independent chains of multiplies and adds: enough independent work to keep a core's
/// arithmetic units busy, so that two threads sharing a core (SMT siblings) take longer than one.
fn wide() {
    let mut x = std::hint::black_box([1.0f64; 128]);
    for _ in 0..1_000_000 {
        for (i, x) in x.iter_mut().enumerate() {
            *x = *x * 0.999_999_9 + 1e-9 * i as f64;
        }
    }
    std::hint::black_box(x);
}

fn main() {
    let mut o = <Opts as clap::Parser>::parse();
    if o.probe {
        // One thread's time over all threads' time, times the thread count: the number of
        // threads that really ran at once (the thread count on idle cores of their own); with
        // a chain that waits on each result, and with wide independent arithmetic, which
        // threads sharing a core's arithmetic units (SMT siblings) run at a share of its rate.
        let threads = rayon::current_num_threads();
        let parallel = threads as f64 * at_once(1, chain) / at_once(threads, chain);
        let parallel_wide = threads as f64 * at_once(1, wide) / at_once(threads, wide);
        println!(
            "{{\"who\": \"probe\", \"threads\": {threads}, \"parallel\": {parallel:.2}, \"parallel_wide\": {parallel_wide:.2}}}"
        );
        return;
    }
    if o.triad {
        println!("{{\"who\": \"triad\", \"threads\": {}, \"gbs\": {:.2}}}", rayon::current_num_threads(), triad());
        return;
    }
    if let Some(threads) = o.scaling.clone() {
        println!("| threads | triad GB/s | S1 GPts/s | S1 % of triad (8 B/pt) | S2 GPts/s | S2 % of triad (16 B/pt) |");
        println!("|---:|---:|---:|---:|---:|---:|");
        o.cases = vec!["s1".into(), "s2".into()];
        o.quiet = true;
        for t in threads {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build().expect("pool");
            pool.install(|| {
                let tr = triad();
                let gpts = run_3d_f32(&o);
                println!(
                    "| {t} | {tr:.1} | {:.3} | {:.0}% | {:.3} | {:.0}% |",
                    gpts[0],
                    100.0 * gpts[0] * 8.0 / tr,
                    gpts[1],
                    100.0 * gpts[1] * 16.0 / tr
                );
            });
        }
        return;
    }
    for &d in &o.dims {
        for p in &o.precs {
            let _ = match (d, p.as_str(), o.fma) {
                (3, "f32", false) => run_3d_f32(&o),
                (3, "f64", false) => run_3d_f64(&o),
                (2, "f32", false) => run_2d_f32(&o),
                (2, "f64", false) => run_2d_f64(&o),
                (3, "f32", true) => run_3d_f32_fma(&o),
                (3, "f64", true) => run_3d_f64_fma(&o),
                (2, "f32", true) => run_2d_f32_fma(&o),
                (2, "f64", true) => run_2d_f64_fma(&o),
                (d, p, _) => panic!("no case {d}D {p}"),
            };
        }
    }
}
