//! `tune`: what autotuning chooses on this GPU, and what is stored.
//!
//! `tune` launches the 7-point diffusion, the 25-point acoustic update and the acoustic model's
//! inner update (in place, per-axis coefficients; f32) without a
//! strategy over an N³ interior and over slabs W points thin along each axis (the regions of a
//! model with absorbing layers), so the runtime tunes each (stencil, shape class), and prints
//! every candidate's time and share of the device's copy bandwidth, the choice marked.
//! `tune --fresh` tunes again without reading or writing the disk cache; `tune --list` prints
//! the records stored in the cache directory.

use stencil_bench::{Acoustic25, Diffusion7};
use stencil_examples::acoustic::AcousticInner;
use stencil_runtime::codegen::analysis::Analysis;
use stencil_runtime::cuda::{DiskCache, Gpu, TuneReport};
use stencil_runtime::prelude::*;
use stencil_runtime::tuning::{self, Timing};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(clap::Parser)]
#[command(about = "Autotuning of CUDA strategies: the candidates' times and the choice per stencil and shape class")]
struct Args {
    /// Interior points per axis.
    #[arg(long, default_value_t = 512)]
    size: usize,
    /// Thickness of the slabs (0: the interior only).
    #[arg(long, default_value_t = 16)]
    slab: usize,
    /// Points between the field's interior boundary and the interior region on every side (a
    /// model's inner region inside its absorbing layers).
    #[arg(long, default_value_t = 0)]
    inset: usize,
    /// The slabs only, without the interior (e.g. to profile a slab's kernels alone).
    #[arg(long)]
    slabs_only: bool,
    /// Tune again, without reading or writing the disk cache.
    #[arg(long)]
    fresh: bool,
    /// Print the records stored in the disk cache and exit.
    #[arg(long)]
    list: bool,
}

fn main() -> Res<()> {
    let args = <Args as clap::Parser>::parse();
    if args.list {
        let dir = DiskCache::from_env().ok_or("no cache directory: set STENCIL_CACHE_DIR or HOME")?;
        let records = tuning::stored(&tuning::tune_cache(&dir));
        println!("{} record(s) in {}", records.len(), dir.dir().join("tune").display());
        println!("\n| stencil | device | shape class | best | candidates timed |");
        println!("|---|---|---|---|---:|");
        for r in records {
            let timed = r.times.iter().filter(|t| t.1.ms().is_some()).count();
            println!("| {} | {} | {} | {} | {timed} of {} |", r.stencil, r.device, r.class, r.best, r.times.len());
        }
        return Ok(());
    }
    let gpu = if args.fresh { Gpu::with_disk_cache(0, None)? } else { Gpu::new(0)? };
    let n = args.size;
    if n < 8 {
        return Err(format!("--size {n}: give at least 8 points per axis").into());
    }
    let copy = gpu.copy_bandwidth_gbs(n * n * n * 4, 20)?;
    println!(
        "device: {}; copy {copy:.0} GB/s; tuning budget {:?} per (stencil, shape class); cache: {}",
        gpu.name(),
        gpu.tune_settings().budget,
        gpu.disk_cache_dir().map_or("none".to_string(), |d| d.display().to_string())
    );
    // The interior and a slab thin along each axis (all inside one N³ field).
    let w = args.inset.min((n - 1) / 2);
    let mut regions = if args.slabs_only { vec![] } else { vec![("interior", [w; 3], [n - 2 * w; 3])] };
    if args.slab > 0 {
        let w = args.slab.min(n);
        regions.extend([("slab thin in i", [0, 0, 0], [w, n, n]), ("slab thin in j", [0, 0, 0], [n, w, n])]);
        regions.push(("slab thin in k", [0, 0, 0], [n, n, w]));
    }
    let c = (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4);
    let s1 = Shape3::new([n, n, n]).halo(1);
    let f = gpu.upload(&Field3::from_fn(s1, |[i, j, k]| ((i + 2 * j + 3 * k) % 17) as f32 * 0.01))?;
    let mut g = gpu.alloc::<f32, 3>(s1)?;
    for &(_, begin, len) in &regions {
        let r = region(&s1, begin, len);
        gpu.run(&r, Diffusion7, (c.0, c.1, c.2, c.3, c.4, c.5, c.6, &f, &mut g))?;
    }
    drop((f, g));
    let s4 = Shape3::new([n, n, n]).halo(4);
    let u = gpu.upload(&Field3::from_fn(s4, |[i, j, k]| ((i + j + k) % 13) as f32 * 0.01))?;
    let up = gpu.upload(&Field3::from_fn(s4, |[i, j, k]| ((i * j + k) % 7) as f32 * 0.01))?;
    let v2 = gpu.upload(&Field3::filled(s4, 0.25f32))?;
    let mut un = gpu.alloc::<f32, 3>(s4)?;
    for &(_, begin, len) in &regions {
        let r = region(&s4, begin, len);
        gpu.run(&r, Acoustic25, (0.1, &u, &up, &v2, &mut un))?;
    }
    // The acoustic model's inner update: the same reads with per-axis coefficients, updating
    // its previous wavefield in place.
    let mut uprev = un;
    let k = [0.1f32, -0.02, 0.003, -0.0004];
    for &(_, begin, len) in &regions {
        let r = region(&s4, begin, len);
        gpu.run(&r, AcousticInner::<f32>::new(), (-0.8, k, k, k, &u, &v2, &mut uprev))?;
    }
    gpu.synchronize()?;
    let bytes = |name: &str| {
        let ir = if name.contains("diffusion") {
            <Diffusion7 as Stencil<3>>::ir()
        } else {
            <Acoustic25 as Stencil<3>>::ir()
        };
        Analysis::of(ir).min_bytes as f64
    };
    let mut reports = gpu.tune_reports();
    reports.sort_by(|a, b| (&a.record.stencil, &a.record.class).cmp(&(&b.record.stencil, &b.record.class)));
    for TuneReport { record, from_disk, spent_ms } in &reports {
        let points = class_points(&record.class, &regions);
        println!(
            "\n{} over {} ({}, {spent_ms:.0} ms): best {}",
            record.stencil,
            record.class,
            if *from_disk { "from the disk cache" } else { "timed now" },
            record.best
        );
        println!("\n| strategy | ms | % of copy |");
        println!("|---|---:|---:|");
        for (s, t) in &record.times {
            let mark = if *s == record.best { " **(chosen)**" } else { "" };
            match (t.ms(), points) {
                (Some(t), Some(p)) => {
                    let share = 100.0 * p * bytes(&record.stencil) / (t * 1e-3) / 1e9 / copy;
                    println!("| {s}{mark} | {t:.4} | {share:.1}% |");
                }
                (Some(t), None) => println!("| {s}{mark} | {t:.4} | |"),
                (None, _) if *t == Timing::CannotRun => println!("| {s} | cannot run here | |"),
                (None, _) => println!("| {s} | not timed (budget spent) | |"),
            }
        }
    }
    Ok(())
}

/// The `len` points from interior point `begin` of `shape`.
fn region(shape: &Shape3, begin: [usize; 3], len: [usize; 3]) -> Loop3D {
    let (n, h) = (shape.extent(), shape.halo_widths());
    Loop3D::from_parts(
        n,
        std::array::from_fn(|a| h[a] + begin[a]),
        std::array::from_fn(|a| n[a] - h[a] - begin[a] - len[a]),
    )
}

/// The points of the region whose shape class prints as `class` (`None` if none matches).
fn class_points(class: &str, regions: &[(&str, [usize; 3], [usize; 3])]) -> Option<f64> {
    regions.iter().find_map(|&(_, _, len)| {
        let [c, m, o] = len.map(|n| n.next_power_of_two());
        class.starts_with(&format!("≤{c}x{m}x{o} ")).then(|| len.iter().product::<usize>() as f64)
    })
}
