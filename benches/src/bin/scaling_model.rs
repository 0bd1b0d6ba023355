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
//! - exchange, axis after axis: per side inside a node (both subdomains' GPUs on the same node
//!   of `GPUS_PER_NODE`) a message's measured fixed cost and rate (pack, copy and unpack
//!   included), and to other nodes NCCL's fixed cost plus the InfiniBand latency, the bytes of
//!   every side to other nodes through the GPU's one adapter; with the halos between nodes in
//!   one round (design record 0049) one fixed cost and every message at once;
//! - a step: `update + exchange` without overlap; `max(inner, exchange) + slabs` with it.
//!
//! The figures: H200 copy bandwidth 4172 GB/s (measured); diffusion 7-point f32 at 83.1% and the
//! 25-point acoustic update f32 at 78.4% of it (`gpu_bench 512`), i.e. 8 and 16 bytes moved per
//! point; NVLink peer copy 395 GB/s per direction with about 2 µs per message (measured on two
//! H200s of one node with `cuMemcpyPeerAsync`: 1 MiB in 4.8 µs, 395 GB/s from 64 MiB); between
//! nodes one 400 Gb/s NDR InfiniBand adapter per GPU (the layout of NVIDIA's 8-GPU H100/H200
//! servers: 50 GB/s per direction) with 3 µs per message, an assumed figure typical of
//! GPU-direct RDMA over NDR. The slabs' fixed cost is measured on two H200s; the program prints
//! its predictions next to the 2- and 4-GPU measurements (`MEASURED`).

use stencil_runtime::{Decomposition, Subdomain};

const COPY_GBS: f64 = 4172.0;
const IB_GBS: f64 = 50.0;
const IB_LATENCY_US: f64 = 3.0;
const GPUS_PER_NODE: usize = 8;
/// One halo message inside a node in one process, each halo copied straight from the
/// neighbour's field (design record 0030): fixed cost and rate from the exchange alone on
/// 2 × H200, one host thread, 2026-12-01 (22–24 µs for 1 MiB per side, 35–36 µs for 4 MiB).
const FIELD_MESSAGE_US: f64 = 18.8;
const FIELD_MESSAGE_GBS: f64 = 252.0;
/// The same through message buffers, as before (pack, peer copy, unpack): 45 µs for 1 MiB per
/// side, 73 µs for 4 MiB.
const PEER_MESSAGE_US: f64 = 35.6;
const PEER_MESSAGE_GBS: f64 = 112.0;
/// The same over NCCL between ranks (23 µs and 50 µs).
const NCCL_MESSAGE_US: f64 = 14.0;
const NCCL_MESSAGE_GBS: f64 = 116.0;
/// The field-to-field copies replayed as one recorded graph (assumed: NCCL's fixed cost, the
/// field-to-field rate; not measured).
const RECORDED_MESSAGE_US: f64 = 14.0;
/// Share of the exchange that stays exposed in a divided step: `base + per_ratio × exchange /
/// inner`, the second term over the time both run (`min(inner, exchange)`) only. What its kernels
/// and copies take from the update running beside them, and its tail, which the slabs wait for,
/// grow as the exchange nears the inner region's length (NCCL moves data with SM kernels, peer
/// copies with the copy engines). Fitted to the 2- and 4-GPU runs together: one share alone
/// cannot fit both (on two GPUs 2 of 45 µs were exposed with peer copies, on four GPUs at strong
/// 512³ the acoustic update left 43 of 237 µs exposed, 52 of 139 over NCCL).
const PEER_EXPOSED: (f64, f64) = (0.04, 0.28);
const NCCL_EXPOSED: (f64, f64) = (0.085, 1.14);
/// Share of the inner block's rate the boundary slabs reach.
const SLAB_EFFICIENCY: f64 = 0.5;
/// Fixed cost of one slab launch (its launch, a partial last wave): measured on two H200s, the
/// one-divided 512³ diffusion update without its exchange takes 6–7 µs longer than the whole
/// update, with one slab per subdomain (`scaling`, column "split, no exchange"). Since design
/// record 0028 a subdomain's slabs run as one launch (`fused`): the cost is paid once per step
/// instead of once per slab (assumed from the launch count; not measured beyond one slab).
const SLAB_FIXED_US: f64 = 6.0;

/// Host time one process spends per GPU and step issuing a divided step (the inner and slab
/// launches, the copies of the exchange, their events): in one process one host thread issues
/// for every GPU, so a step cannot be shorter than `GPUs × this`. Calibrated on 4 × H200: the
/// strong 512³ diffusion step takes 2.07× less than on one GPU (0.141 ms, no overlap) while its
/// update is a quarter (0.078 ms), i.e. 4 × 37.5 µs of issue at the model's one-GPU rate (it was
/// 1.83× with 40 µs before peer copies waited for their buffer's pack alone).
const HOST_US_PER_GPU: f64 = 37.5;
/// Host time per GPU and step with the whole step replayed as one recorded graph over every GPU of
/// the process (one graph launch plus an event pair per GPU).
const HOST_US_PER_GPU_RECORDED: f64 = 4.0;
/// Host time per step of a rank driving one GPU over NCCL: its launches, and per neighbour the
/// NCCL calls of its messages. Calibrated on 4 × H200: the strong 512³ diffusion step over NCCL
/// takes 0.119 ms (2.48×) with two neighbours per rank where its GPU work is 0.09 ms; 2 GPUs (one
/// neighbour, 0.161 ms) are not bound by it.
const HOST_US_PER_RANK: f64 = 40.0;
const HOST_US_PER_NCCL_MESSAGE: f64 = 40.0;

/// One measurement with `scaling` (best overlap mode), 512³ per GPU (weak) or 512³ in all
/// (strong).
struct Measured {
    gpus: usize,
    stencil: &'static str,
    /// "weak" or "strong".
    kind: &'static str,
    drive: Drive,
    /// Whether a subdomain's slabs ran as one launch (design record 0028).
    fused: bool,
    /// Weak: efficiency; strong: speed-up.
    value: f64,
    /// When and how.
    when: &'static str,
}

const D7: &str = "diffusion 7-point f32";
const A25: &str = "acoustic 25-point f32";

/// The measurements the model is held against: 2 × H200 (NVLink NV18), split along z, and
/// 4 × H200 (NV18 between every pair), the auto process grid, one host thread in one process.
const MEASURED: [Measured; 24] = {
    const fn m(
        gpus: usize,
        stencil: &'static str,
        kind: &'static str,
        drive: Drive,
        fused: bool,
        value: f64,
        when: &'static str,
    ) -> Measured {
        Measured { gpus, stencil, kind, drive, fused, value, when }
    }
    const B2: &str = "2026-11-29, through buffers";
    const N2: &str = "2026-11-24";
    const F2: &str = "2026-12-01";
    const B4: &str = "2026-11-28, through buffers";
    use Drive::{OneProcess as F, OneProcessBuffers as B, RankPerGpu as R};
    [
        m(2, D7, "weak", B, true, 0.968, B2),
        m(2, D7, "strong", B, true, 1.84, B2),
        m(2, A25, "weak", B, true, 0.974, B2),
        m(2, A25, "strong", B, true, 1.92, B2),
        m(2, D7, "weak", R, false, 0.970, N2),
        m(2, D7, "strong", R, false, 1.84, N2),
        m(2, A25, "weak", R, false, 0.968, N2),
        m(2, A25, "strong", R, false, 1.85, N2),
        m(2, D7, "weak", F, true, 0.979, F2),
        m(2, D7, "strong", F, true, 1.86, F2),
        m(2, A25, "weak", F, true, 1.008, F2),
        m(2, A25, "strong", F, true, 1.97, F2),
        m(2, D7, "weak", R, true, 0.954, F2),
        m(2, D7, "strong", R, true, 1.83, F2),
        m(2, A25, "weak", R, true, 0.965, F2),
        m(2, A25, "strong", R, true, 1.87, F2),
        m(4, D7, "weak", B, false, 0.943, B4),
        m(4, D7, "strong", B, false, 2.07, B4),
        m(4, A25, "weak", B, false, 0.938, B4),
        m(4, A25, "strong", B, false, 3.20, B4),
        m(4, D7, "weak", R, false, 0.921, "2026-11-28"),
        m(4, D7, "strong", R, false, 2.47, "2026-11-28"),
        m(4, A25, "weak", R, false, 0.953, "2026-11-28"),
        m(4, A25, "strong", R, false, 3.04, "2026-11-28"),
    ]
};

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

/// How the GPUs are driven: one process per node whose one host thread issues for all its GPUs
/// (halos copied field to field inside the node, or, as before, through message buffers), the
/// same with the step replayed as one recorded graph, or one rank per GPU (NCCL inside the node
/// too).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Drive {
    OneProcess,
    OneProcessBuffers,
    Recorded,
    RankPerGpu,
}

/// Predicted milliseconds per step for subdomain `s` of `d`, with or without overlap: the GPU's
/// step, or the host's issue of it where that is longer.
fn step_ms(st: &Stencil, d: &Decomposition<3>, s: &Subdomain<3>, overlap: bool, drive: Drive, build: Build) -> f64 {
    let gpus_here = d.len().min(GPUS_PER_NODE) as f64;
    let host_ms = 1e-3
        * match drive {
            Drive::OneProcess | Drive::OneProcessBuffers if d.len() > 1 => gpus_here * HOST_US_PER_GPU,
            Drive::Recorded if d.len() > 1 => gpus_here * HOST_US_PER_GPU_RECORDED,
            Drive::RankPerGpu if d.len() > 1 => HOST_US_PER_RANK + neighbours(d, s) * HOST_US_PER_NCCL_MESSAGE,
            _ => 0.0,
        };
    gpu_step_ms(st, d, s, overlap, drive, build).max(host_ms)
}

/// How many neighbours subdomain `s` exchanges with.
fn neighbours(d: &Decomposition<3>, s: &Subdomain<3>) -> f64 {
    let mut n = 0.0;
    for axis in 0..3 {
        for side in [-1i8, 1] {
            let mut dir = [0i8; 3];
            dir[axis] = side;
            if matches!(d.neighbour(s, dir), stencil_runtime::Neighbour::Domain(_)) {
                n += 1.0;
            }
        }
    }
    n
}

/// What the runtime does: the slabs of a subdomain as one launch (`fused`, design record 0028);
/// the halos between ranks in one round (`round`, design record 0049) or axis by axis; the
/// subdomains numbered so that each node holds a compact block of the process grid (`blocks`,
/// `Decomposition::in_blocks_of`, design record 0050) or a row of it.
#[derive(Clone, Copy, Debug)]
struct Build {
    fused: bool,
    round: bool,
    blocks: bool,
}

/// As the runtime runs by default: slabs as one launch, over NCCL the axes one after the other
/// (`STENCIL_ONE_ROUND_HALOS=all` takes the round), a node's subdomains a compact block (the
/// examples' placement over several nodes).
const DEFAULT: Build = Build { fused: true, round: false, blocks: true };

/// The GPU's part of [`step_ms`].
fn gpu_step_ms(st: &Stencil, d: &Decomposition<3>, s: &Subdomain<3>, overlap: bool, drive: Drive, build: Build) -> f64 {
    let points: f64 = s.extent.iter().map(|&n| n as f64).product();
    let update = points / st.rate;
    let mut exchange = 0.0;
    let mut slab_time = 0.0;
    let mut slab_points = 0.0;
    let mut slabs: f64 = 0.0;
    // A message inside a node: its fixed cost and rate as the exchange alone measured them (pack,
    // copy, unpack, events); between nodes, NCCL's fixed cost at the adapter's bandwidth.
    let (inside_us, inside_gbs) = match drive {
        Drive::OneProcess => (FIELD_MESSAGE_US, FIELD_MESSAGE_GBS),
        Drive::OneProcessBuffers => (PEER_MESSAGE_US, PEER_MESSAGE_GBS),
        Drive::Recorded => (RECORDED_MESSAGE_US, FIELD_MESSAGE_GBS),
        Drive::RankPerGpu => (NCCL_MESSAGE_US, NCCL_MESSAGE_GBS),
    };
    // Per axis: the sides inside the node (in one process the peer copies of an axis's two
    // sides run one after the other: the transfer of a middle subdomain of four, with two
    // neighbours, took 105-108 µs against 44-50 µs for one neighbour on two GPUs; NCCL's kernels
    // move both at once), and the bytes to other nodes, which share the GPU's adapter.
    let (mut inside_axes, mut inside_widest, mut outside_axes, mut outside_bytes): (f64, f64, f64, f64) =
        (0.0, 0.0, 0.0, 0.0);
    let between_us = NCCL_MESSAGE_US + IB_LATENCY_US;
    for axis in 0..3 {
        if d.grid()[axis] == 1 {
            continue;
        }
        let face: f64 = (0..3).filter(|&a| a != axis).map(|a| s.extent[a] as f64).product();
        let bytes = face * (st.halo * st.bytes) as f64;
        let (mut inside, mut outside): (f64, f64) = (0.0, 0.0);
        for side in [-1i8, 1] {
            let mut dir = [0i8; 3];
            dir[axis] = side;
            let stencil_runtime::Neighbour::Domain(j) = d.neighbour(s, dir) else { continue };
            if j / GPUS_PER_NODE == s.index / GPUS_PER_NODE {
                let message = inside_us * 1e-6 + bytes / (inside_gbs * 1e9);
                inside = if drive != Drive::RankPerGpu { inside + message } else { inside.max(message) };
            } else {
                outside += bytes;
            }
            slab_time += face * st.halo as f64 / (st.rate * SLAB_EFFICIENCY);
            slab_points += face * st.halo as f64;
            slabs += 1.0;
        }
        let to_nodes = if outside > 0.0 { between_us * 1e-6 + outside / (IB_GBS * 1e9) } else { 0.0 };
        // Axis by axis: each axis's messages at once, the axes one after the other.
        exchange += inside.max(to_nodes);
        inside_axes += inside;
        inside_widest = inside_widest.max(inside);
        outside_axes += to_nodes;
        outside_bytes += outside;
    }
    if build.round && outside_axes > 0.0 {
        // One round: every message to other nodes at once, its fixed cost once, its bytes through
        // the adapter; beside it the sides inside the node (peer copies still charged axis after
        // axis, which one round within a node is not measured to beat between GPUs; NCCL's
        // messages all at once).
        let inside = if drive == Drive::RankPerGpu { inside_widest } else { inside_axes };
        exchange = inside.max(between_us * 1e-6 + outside_bytes / (IB_GBS * 1e9));
    }
    slab_time += SLAB_FIXED_US * 1e-6 * if build.fused { slabs.min(1.0) } else { slabs };
    let seconds = if overlap {
        let inner = (points - slab_points) / st.rate;
        let (base, per_ratio) = if drive == Drive::RankPerGpu { NCCL_EXPOSED } else { PEER_EXPOSED };
        // The growing share applies while both run: over at most the inner region's length.
        let together = inner.min(exchange);
        inner.max(exchange) + slab_time + base * exchange + per_ratio * together * together / inner
    } else {
        update + exchange
    };
    seconds * 1e3
}

/// The slowest subdomain's step over `p` GPUs for a global grid `global`, driven one process per
/// node.
fn predict(st: &Stencil, global: [usize; 3], p: usize, overlap: bool) -> Option<f64> {
    predict_with(st, global, p, overlap, Drive::OneProcess, DEFAULT)
}

/// [`predict`] with the GPUs driven as `drive` says and the runtime doing as `build` says.
fn predict_with(st: &Stencil, global: [usize; 3], p: usize, overlap: bool, drive: Drive, build: Build) -> Option<f64> {
    let d = Decomposition::auto(global, p, [false; 3], [st.halo; 3]).ok()?;
    let d = if build.blocks && p > GPUS_PER_NODE { d.in_blocks_of(GPUS_PER_NODE) } else { d };
    d.subdomains().map(|s| step_ms(st, &d, &s, overlap, drive, build)).reduce(f64::max)
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
    let mut csv = String::from("stencil,kind,gpus,drive,overlap,ms_per_step,efficiency\n");
    let drives = [Drive::OneProcess, Drive::RankPerGpu, Drive::Recorded];
    for st in &stencils {
        println!("\n{} ({:.0} GPts/s on one GPU, halo {}), with one-divided overlap:", st.name, st.rate / 1e9, st.halo);
        println!("\n| GPUs | weak 512³/GPU: one process per node | rank per GPU | recorded graph | strong 1024³: one process per node | rank per GPU | recorded graph |");
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        let weak1 = predict(st, [512; 3], 1, false).expect("one GPU");
        let strong1 = predict(st, [1024; 3], 1, false).expect("one GPU");
        for &p in &gpus {
            // Weak: a 512³ block per GPU, the global grid grown along the auto grid's axes.
            let grid = Decomposition::<3>::auto([512 * p; 3], p, [false; 3], [st.halo; 3])?.grid();
            let global = grid.map(|g| 512 * g);
            let mut cells = Vec::new();
            for (kind, global, base) in [("weak", global, weak1), ("strong", [1024; 3], strong1)] {
                for drive in drives {
                    for overlap in [false, true] {
                        let ms = predict_with(st, global, p, overlap, drive, DEFAULT);
                        // Weak: efficiency t1 / tP; strong: speedup t1 / tP over P.
                        let eff = ms.map(|ms| if kind == "weak" { base / ms } else { base / ms / p as f64 });
                        if let (Some(ms), Some(eff)) = (ms, eff) {
                            csv.push_str(&format!("{},{kind},{p},{drive:?},{overlap},{ms:.5},{eff:.4}\n", st.name));
                        }
                        if overlap {
                            cells.push(eff.map_or("–".to_string(), |e| format!("{:.1}%", 100.0 * e)));
                        }
                    }
                }
            }
            println!("| {p} | {} |", cells.join(" | "));
        }
    }
    println!("\nThe model against 2 and 4 × H200 (`scaling`, best overlap mode; in one process with one host thread, or a rank per GPU over NCCL):\n");
    println!("| stencil | GPUs | scaling | driven | measured on | predicted | measured | points apart |");
    println!("|---|---:|---|---|---|---:|---:|---:|");
    let mut worst: f64 = 0.0;
    for st in &stencils {
        let weak1 = predict(st, [512; 3], 1, false).expect("one GPU");
        for m in MEASURED.iter().filter(|m| m.stencil == st.name) {
            let (p, weak) = (m.gpus, m.kind == "weak");
            let global = match (weak, p) {
                (true, 2) => [512, 512, 1024],
                (true, _) => {
                    Decomposition::<3>::auto([512 * p; 3], p, [false; 3], [st.halo; 3])?.grid().map(|g| 512 * g)
                }
                (false, _) => [512; 3],
            };
            let predicted = weak1
                / predict_with(st, global, p, true, m.drive, Build { fused: m.fused, ..DEFAULT }).expect("predicted");
            let show = |v: f64| if weak { format!("{:.1}%", 100.0 * v) } else { format!("{v:.2}x") };
            // Points of efficiency (strong: of speedup / P) between prediction and measurement.
            let points = 100.0 * (predicted - m.value).abs() / if weak { 1.0 } else { p as f64 };
            worst = worst.max(points);
            let driven = match m.drive {
                Drive::OneProcess => "one process, field to field",
                Drive::OneProcessBuffers => "one process, buffers",
                Drive::RankPerGpu => "ranks, NCCL",
                Drive::Recorded => "recorded graph",
            };
            println!(
                "| {} | {p} | {} | {driven} | {} | {} | {} | {points:.1} |",
                m.stencil,
                m.kind,
                m.when,
                show(predicted),
                show(m.value)
            );
        }
    }
    println!("\nlargest difference: {worst:.1} points of efficiency (strong: of speedup per GPU)");
    println!("\nTo be checked next (`scaling --gpus 1,2,4[,8] --strong 512`, one process with one host thread, field to field; ranks over NCCL):\n");
    println!("| stencil | GPUs | scaling | predicted, one process | predicted, ranks |");
    println!("|---|---:|---|---:|---:|");
    for st in &stencils {
        let weak1 = predict(st, [512; 3], 1, false).expect("one GPU");
        for p in [4usize, 8] {
            for weak in [true, false] {
                let global = if weak {
                    Decomposition::<3>::auto([512 * p; 3], p, [false; 3], [st.halo; 3])?.grid().map(|g| 512 * g)
                } else {
                    [512; 3]
                };
                let at = |drive| weak1 / predict_with(st, global, p, true, drive, DEFAULT).expect("predicted");
                let show = |v: f64| if weak { format!("{:.1}%", 100.0 * v) } else { format!("{v:.2}x") };
                println!(
                    "| {} | {p} | {} | {} | {} |",
                    st.name,
                    if weak { "weak" } else { "strong" },
                    show(at(Drive::OneProcess)),
                    show(at(Drive::RankPerGpu))
                );
            }
        }
    }
    println!(
        "\nweak at 4096 GPUs with overlap: as run by default (slabs as one launch, a node's subdomains a compact \
         block, between nodes over NCCL the axes one after the other), one launch per slab, a node's subdomains \
         in a row of the process grid, and the halos between nodes in one round (design record 0049; \
         `STENCIL_ONE_ROUND_HALOS=all` over NCCL):\n"
    );
    println!(
        "| stencil | one process: default | per slab | in a row | one round | ranks: default | per slab | in a row | one round |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for st in &stencils {
        let weak1 = predict(st, [512; 3], 1, false).expect("one GPU");
        let global = Decomposition::<3>::auto([512 * 4096; 3], 4096, [false; 3], [st.halo; 3])?.grid().map(|g| 512 * g);
        let at = |drive, build| {
            let e = weak1 / predict_with(st, global, 4096, true, drive, build).expect("predicted");
            format!("{:.1}%", 100.0 * e)
        };
        let builds = [
            DEFAULT,
            Build { fused: false, ..DEFAULT },
            Build { blocks: false, ..DEFAULT },
            Build { round: true, ..DEFAULT },
        ];
        let cells: Vec<String> =
            [Drive::OneProcess, Drive::RankPerGpu].into_iter().flat_map(|drive| builds.map(|b| at(drive, b))).collect();
        println!("| {} | {} |", st.name, cells.join(" | "));
    }
    println!(
        "\nweak: efficiency t(1 GPU) / t(P GPUs) at a fixed block per GPU; strong: speedup / P on one grid. \
         {GPUS_PER_NODE} GPUs per node, InfiniBand {IB_GBS} GB/s between nodes."
    );
    println!(
        "messages inside a node: {FIELD_MESSAGE_US} µs + bytes / {FIELD_MESSAGE_GBS} GB/s field to field in one process \
         ({PEER_MESSAGE_US} µs + bytes / {PEER_MESSAGE_GBS} GB/s through buffers), {NCCL_MESSAGE_US} µs + \
         bytes / {NCCL_MESSAGE_GBS} GB/s over NCCL; host issue {HOST_US_PER_GPU} µs per GPU and step in one process \
         ({HOST_US_PER_GPU_RECORDED} µs replayed as a graph)"
    );
    if let Some(path) = csv_path {
        std::fs::write(&path, csv)?;
        println!("wrote {path}");
    }
    Ok(())
}
