//! Scaling on paper: predicted weak- and strong-scaling efficiency of a decomposed stencil step
//! on 1 to 4096 GPUs, from per-GPU figures measured on one H200 and link figures, with and
//! without overlap of the exchange (`CompCommBinder`'s one-divided step). No GPU needed.
//!
//! `cargo run --release -p stencil-bench --bin scaling_model [-- --csv FILE]` prints the tables
//! and writes the curves as CSV; `scripts/plot-scaling FILE PNG` draws them.
//!
//! The model, per GPU (the slowest subdomain of the process grid `Decomposition::auto` picks):
//! - update: `points / rate`, the rate measured for the stencil on one H200 (`gpu_bench`);
//!   the boundary slabs of a divided step run at `SLAB_EFFICIENCY` of that rate (thin slabs
//!   use the memory system worse than the inner block);
//! - exchange, axis after axis: pack and unpack (read and write of the message at the measured
//!   copy bandwidth) plus `OP_LATENCY` each, and per side `link latency + bytes / link
//!   bandwidth`, the two sides of an axis at once; a side is inside a node (NVLink peer copy)
//!   when both subdomains' GPUs are on the same node of `GPUS_PER_NODE`, else InfiniBand;
//! - a step: `update + exchange` without overlap; `max(inner, exchange) + slabs` with it.
//!
//! The figures: H200 copy bandwidth 4172 GB/s (measured); diffusion 7-point f32 at 83.1% and the
//! 25-point acoustic update f32 at 78.4% of it (`gpu_bench 512`), i.e. 8 and 16 bytes moved per
//! point; NVLink peer copy 395 GB/s per direction with about 2 µs per message (measured on two
//! H200s of one node with `cuMemcpyPeerAsync`: 1 MiB in 4.8 µs, 395 GB/s from 64 MiB); between
//! nodes one 400 Gb/s NDR InfiniBand adapter per GPU (the layout of NVIDIA's 8-GPU H100/H200
//! servers: 50 GB/s per direction) with 3 µs per message, an assumed figure typical of
//! GPU-direct RDMA over NDR. The slabs' fixed cost is measured on two H200s; the program prints
//! its predictions for 2 GPUs next to the 2-GPU measurements (`MEASURED_2GPU`).

use stencil_runtime::{Decomposition, Subdomain};

const COPY_GBS: f64 = 4172.0;
const NVLINK_GBS: f64 = 395.0;
const NVLINK_LATENCY_US: f64 = 2.0;
const IB_GBS: f64 = 50.0;
const IB_LATENCY_US: f64 = 3.0;
const GPUS_PER_NODE: usize = 8;
/// GPU-side cost of one pack, copy or unpack operation besides its bytes.
const OP_LATENCY_US: f64 = 4.0;
/// Share of the inner block's rate the boundary slabs reach.
const SLAB_EFFICIENCY: f64 = 0.5;
/// Fixed cost of splitting off one slab (its own launch, a partial last wave): measured on two
/// H200s, the one-divided 512³ diffusion update without its exchange takes 6–7 µs longer than the
/// whole update, with one slab per subdomain (`scaling`, column "split, no exchange").
const SLAB_FIXED_US: f64 = 6.0;

/// Measured on 2 × H200 (NVLink NV18; `scaling` in one process and under `mpiexec -n 2` with
/// `STENCIL_TRANSPORT=nccl`, 2026-11-24): (stencil, quantity, measured with peer copies in one
/// process, measured over NCCL between two ranks). Weak: 512³ per GPU; strong: 512³ on 2 GPUs;
/// "overlap" is the faster divided mode; where repeated runs gave a range, its lower end (the
/// scaling page of the performance docs gives the ranges).
const MEASURED_2GPU: [(&str, &str, f64, f64); 8] = [
    ("diffusion 7-point f32", "weak, no overlap", 0.861, 0.919),
    ("diffusion 7-point f32", "weak, overlap", 0.981, 0.970),
    ("diffusion 7-point f32", "strong 512³, no overlap", 1.46, 1.64),
    ("diffusion 7-point f32", "strong 512³, overlap", 1.86, 1.84),
    ("acoustic 25-point f32", "weak, no overlap", 0.897, 0.927),
    ("acoustic 25-point f32", "weak, overlap", 0.973, 0.968),
    ("acoustic 25-point f32", "strong 512³, no overlap", 1.61, 1.71),
    ("acoustic 25-point f32", "strong 512³, overlap", 1.88, 1.85),
];

/// A stencil as the model sees it.
struct Stencil {
    name: &'static str,
    /// Points per second on one GPU.
    rate: f64,
    /// Halo depth per axis.
    halo: usize,
    /// Bytes of one exchanged value.
    bytes: usize,
}

/// Predicted milliseconds per step for subdomain `s` of `d`, with or without overlap.
fn step_ms(st: &Stencil, d: &Decomposition<3>, s: &Subdomain<3>, overlap: bool) -> f64 {
    let points: f64 = s.extent.iter().map(|&n| n as f64).product();
    let update = points / st.rate;
    let mut exchange = 0.0;
    let mut slab_points = 0.0;
    let mut slabs = 0.0;
    for axis in 0..3 {
        if d.grid()[axis] == 1 {
            continue;
        }
        let face: f64 = (0..3).filter(|&a| a != axis).map(|a| s.extent[a] as f64).product();
        let bytes = face * (st.halo * st.bytes) as f64;
        let mut slowest: f64 = 0.0;
        for side in [-1i8, 1] {
            let mut dir = [0i8; 3];
            dir[axis] = side;
            let stencil_runtime::Neighbour::Domain(j) = d.neighbour(s, dir) else { continue };
            let same_node = j / GPUS_PER_NODE == s.index / GPUS_PER_NODE;
            let (gbs, latency) = if same_node { (NVLINK_GBS, NVLINK_LATENCY_US) } else { (IB_GBS, IB_LATENCY_US) };
            slowest = slowest.max(latency * 1e-6 + bytes / (gbs * 1e9));
            slab_points += face * st.halo as f64;
            slabs += 1.0;
        }
        // Pack and unpack both sides: each reads and writes the message once.
        let pack = 2.0 * (2.0 * 2.0 * bytes) / (COPY_GBS * 1e9) + 3.0 * OP_LATENCY_US * 1e-6;
        exchange += slowest + pack;
    }
    let seconds = if overlap {
        let slab_time = slab_points / (st.rate * SLAB_EFFICIENCY) + slabs * SLAB_FIXED_US * 1e-6;
        let inner = (points - slab_points) / st.rate;
        inner.max(exchange) + slab_time
    } else {
        update + exchange
    };
    seconds * 1e3
}

/// The slowest subdomain's step over `p` GPUs for a global grid `global`.
fn predict(st: &Stencil, global: [usize; 3], p: usize, overlap: bool) -> Option<f64> {
    let d = Decomposition::auto(global, p, [false; 3], [st.halo; 3]).ok()?;
    d.subdomains().map(|s| step_ms(st, &d, &s, overlap)).reduce(f64::max)
}

/// Command line.
#[derive(clap::Parser)]
#[command(about = "Predicted weak and strong scaling on 1-4096 GPUs, with and without overlap")]
struct Args {
    /// Also write the predictions as CSV to this file (for scripts/plot-scaling).
    #[arg(long)]
    csv: Option<String>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let csv_path = <Args as clap::Parser>::parse().csv;
    let stencils = [
        Stencil { name: "diffusion 7-point f32", rate: 0.831 * COPY_GBS * 1e9 / 8.0, halo: 1, bytes: 4 },
        Stencil { name: "acoustic 25-point f32", rate: 0.784 * COPY_GBS * 1e9 / 16.0, halo: 4, bytes: 4 },
    ];
    let gpus = [1usize, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];
    let mut csv = String::from("stencil,kind,gpus,overlap,ms_per_step,efficiency\n");
    for st in &stencils {
        println!("\n{} ({:.0} GPts/s on one GPU, halo {}):", st.name, st.rate / 1e9, st.halo);
        println!("\n| GPUs | weak 512³/GPU, no overlap | weak, overlap | strong 1024³, no overlap | strong, overlap |");
        println!("|---:|---:|---:|---:|---:|");
        let weak1 = predict(st, [512; 3], 1, false).expect("one GPU");
        let strong1 = predict(st, [1024; 3], 1, false).expect("one GPU");
        for &p in &gpus {
            // Weak: a 512³ block per GPU, the global grid grown along the auto grid's axes.
            let grid = Decomposition::<3>::auto([512 * p; 3], p, [false; 3], [st.halo; 3])?.grid();
            let global = grid.map(|g| 512 * g);
            let mut cells = Vec::new();
            for (kind, global, base) in [("weak", global, weak1), ("strong", [1024; 3], strong1)] {
                for overlap in [false, true] {
                    let ms = predict(st, global, p, overlap);
                    // Weak: efficiency t1 / tP; strong: speedup t1 / tP over P.
                    let eff = ms.map(|ms| if kind == "weak" { base / ms } else { base / ms / p as f64 });
                    if let (Some(ms), Some(eff)) = (ms, eff) {
                        csv.push_str(&format!("{},{kind},{p},{overlap},{ms:.5},{eff:.4}\n", st.name));
                    }
                    cells.push(eff.map_or("–".to_string(), |e| format!("{:.1}%", 100.0 * e)));
                }
            }
            println!("| {p} | {} |", cells.join(" | "));
        }
    }
    println!("\nThe model against 2 × H200 (measured: peer copies in one process / NCCL between two ranks):\n");
    println!("| stencil | 2 GPUs | predicted | measured, peer copies | measured, NCCL |");
    println!("|---|---|---:|---:|---:|");
    for st in &stencils {
        let weak1 = predict(st, [512; 3], 1, false).expect("one GPU");
        for (name, quantity, peer, nccl) in MEASURED_2GPU.iter().filter(|m| m.0 == st.name) {
            let overlap = !quantity.contains("no overlap");
            let predicted = if quantity.starts_with("weak") {
                weak1 / predict(st, [512, 512, 1024], 2, overlap).expect("two GPUs")
            } else {
                weak1 / predict(st, [512; 3], 2, overlap).expect("two GPUs")
            };
            let show =
                |v: f64| if quantity.starts_with("weak") { format!("{:.1}%", 100.0 * v) } else { format!("{v:.2}x") };
            println!("| {name} | {quantity} | {} | {} | {} |", show(predicted), show(*peer), show(*nccl));
        }
    }
    println!(
        "\nweak: efficiency t(1 GPU) / t(P GPUs) at a fixed block per GPU; strong: speedup / P on one grid. \
         {GPUS_PER_NODE} GPUs per node: NVLink {NVLINK_GBS} GB/s inside, InfiniBand {IB_GBS} GB/s between nodes."
    );
    if let Some(path) = csv_path {
        std::fs::write(&path, csv)?;
        println!("wrote {path}");
    }
    Ok(())
}
