//! How a CPU launch is cut into tasks: the block of a 3D sweep, whether outputs are written with
//! non-temporal stores, whether denormals are flushed. A small model picks the block from the
//! stencil's reach and the cache sizes; [`Tuning`] (set by [`set_tuning`] or the `STENCIL_CPU_*`
//! environment variables, read once) overrides it.
//!
//! The model: a task owns a tile of `bc` points along the contiguous axis by `bm` rows along the
//! middle axis and sweeps `bo` planes along the outer axis, so the planes a read reaches stay in
//! its core's L2 and each input comes from memory about once. Per point the tile moves
//! `Σ_inputs elem · (bc + span_c)/bc · (bm + span_m)/bm · (bo + span_o)/bo` bytes of reads (the
//! halo of a tile is read again by its neighbours) plus the writes (twice with ordinary stores:
//! write-allocate). Among the tiles whose live planes fit in half an L2 it takes the one that
//! moves the fewest bytes, divided by how evenly the tasks fill the threads; the outer axis is cut
//! into chunks until there are about eight tasks per thread. Rows are cut along the contiguous
//! axis only when even a one-row tile would not fit.

use crate::field::Shape;
use crate::range::Loop;
use crate::stencil::StencilInfo;
use std::sync::{OnceLock, RwLock};

/// Whether written fields are stored with non-temporal (streaming) stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Streaming {
    /// 3D launches: when the launch writes more than this process's share of the caches holds
    /// (the L2 of each thread plus 4 MiB of last-level cache per thread, at most the whole last
    /// level): the outputs go to memory anyway, streaming saves reading their lines first, and
    /// output lines no longer evict the planes a tile keeps in L2. 1D and 2D launches (which
    /// keep only `2r + 1` rows for reuse): only when the launch writes more than the whole last
    /// level holds, since the last level then keeps ordinary stores' lines for the next sweep.
    /// (Measured on a 2-vCPU VM reporting a 480 MiB L3: streaming doubled the 3D 25-point update
    /// on 256³ and halved the 2D one on 4096², whose fields stay in that L3.)
    Auto,
    /// Whenever the outputs are only written (a read-modify-write field never streams).
    On,
    /// Never.
    Off,
}

/// Run-time settings of the CPU nest. `Default` is the model with every choice automatic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tuning {
    /// Tile of 3D sweeps, `[contiguous, middle, outer]` points (0 in a slot: the model's
    /// choice). `STENCIL_CPU_BLOCK=bc,bm,bo`.
    pub block: [usize; 3],
    /// Non-temporal stores. `STENCIL_CPU_NT=auto|on|off`.
    pub streaming: Streaming,
    /// Flush denormal results and inputs to zero (x86 MXCSR FTZ and DAZ) while a launch runs:
    /// faster where values decay to denormals, but results then differ from IEEE arithmetic
    /// (and from the GPU kernels). Off by default. `STENCIL_CPU_FTZ=1`.
    pub flush_denormals: bool,
    /// L2 bytes per core the model plans for (0: detected). `STENCIL_CPU_L2=bytes`.
    pub l2_bytes: usize,
    /// Last-level cache bytes (0: detected). `STENCIL_CPU_LLC=bytes`.
    pub llc_bytes: usize,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning { block: [0; 3], streaming: Streaming::Auto, flush_denormals: false, l2_bytes: 0, llc_bytes: 0 }
    }
}

impl Tuning {
    /// The defaults with the `STENCIL_CPU_*` environment variables applied.
    pub fn from_env() -> Tuning {
        let mut t = Tuning::default();
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        if let Some(v) = var("STENCIL_CPU_BLOCK") {
            for (slot, part) in t.block.iter_mut().zip(v.split(',')) {
                *slot = part.trim().parse().unwrap_or(0);
            }
        }
        if let Some(v) = var("STENCIL_CPU_NT") {
            t.streaming = match v.trim() {
                "on" | "1" => Streaming::On,
                "off" | "0" => Streaming::Off,
                _ => Streaming::Auto,
            };
        }
        t.flush_denormals = var("STENCIL_CPU_FTZ").is_some_and(|v| v.trim() == "1" || v.trim() == "on");
        t.l2_bytes = var("STENCIL_CPU_L2").and_then(|v| v.trim().parse().ok()).unwrap_or(0);
        t.llc_bytes = var("STENCIL_CPU_LLC").and_then(|v| v.trim().parse().ok()).unwrap_or(0);
        t
    }
}

fn tuning_lock() -> &'static RwLock<Tuning> {
    static TUNING: OnceLock<RwLock<Tuning>> = OnceLock::new();
    TUNING.get_or_init(|| RwLock::new(Tuning::from_env()))
}

/// The settings later launches use.
pub fn tuning() -> Tuning {
    *tuning_lock().read().unwrap_or_else(|e| e.into_inner())
}

/// Replaces the settings of later launches (the environment is read only for the first value).
pub fn set_tuning(t: Tuning) {
    *tuning_lock().write().unwrap_or_else(|e| e.into_inner()) = t;
}

/// Cache sizes in bytes: L2 per core and the last level, from Linux's sysfs (1 MiB and 32 MiB
/// where it says nothing).
pub fn cache_sizes() -> (usize, usize) {
    static SIZES: OnceLock<(usize, usize)> = OnceLock::new();
    *SIZES.get_or_init(|| {
        let (mut l2, mut llc) = (0, 0);
        for i in 0..8 {
            let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
            let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
            let (Some(level), Some(size)) = (read("level"), read("size")) else { continue };
            if read("type").is_some_and(|t| t.trim() == "Instruction") {
                continue;
            }
            let size = size.trim();
            let bytes = match size.strip_suffix('K') {
                Some(k) => k.parse::<usize>().unwrap_or(0) << 10,
                None => match size.strip_suffix('M') {
                    Some(m) => m.parse::<usize>().unwrap_or(0) << 20,
                    None => size.parse().unwrap_or(0),
                },
            };
            match level.trim() {
                "2" => l2 = bytes,
                "3" => llc = bytes,
                _ => {}
            }
        }
        let l2 = if l2 == 0 { 1 << 20 } else { l2 };
        (l2, if llc == 0 { (32 << 20).max(l2) } else { llc })
    })
}

/// What one launch does: the tile of a 3D sweep (`[contiguous, middle, outer]`), or the rows per
/// task in 2D (`block[1]`), and the store and denormal modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Tile, in the range's `[contiguous, middle, outer]` axes.
    pub block: [usize; 3],
    /// Outputs written with non-temporal stores.
    pub stream: bool,
    /// MXCSR FTZ and DAZ set while the tasks run.
    pub flush_denormals: bool,
}

/// Reach of the stencil's read fields along the range's `[contiguous, middle, outer]` axes:
/// for each read field, the span `hi - lo` per axis.
fn spans<const D: usize>(info: &StencilInfo, axes: [usize; D]) -> Vec<[usize; 3]> {
    info.fields
        .iter()
        .filter(|f| !f.writable)
        .map(|f| {
            let mut s = [0; 3];
            for (slot, &a) in s.iter_mut().zip(axes.iter()) {
                *slot = (f.hi[a] - f.lo[a]).max(0) as usize;
            }
            s
        })
        .collect()
}

/// The plan of a launch of `info` over `range` on fields of `shape` with `elem`-byte elements on
/// `threads` threads; `write_only`: no written field is also read (streaming allowed).
pub fn plan<const D: usize>(
    range: &Loop<D>,
    shape: &Shape<D>,
    info: &StencilInfo,
    elem: usize,
    write_only: bool,
    threads: usize,
) -> Plan {
    let t = tuning();
    let (l2_detected, llc_detected) = cache_sizes();
    let l2 = if t.l2_bytes > 0 { t.l2_bytes } else { l2_detected };
    let llc = if t.llc_bytes > 0 { t.llc_bytes } else { llc_detected };
    let axes = shape.element_order().axes::<D>();
    let n = range.len_per_axis();
    let mut len = [1usize; 3];
    for (slot, &a) in len.iter_mut().zip(axes.iter()) {
        *slot = n[a];
    }
    let outputs = info.fields.iter().filter(|f| f.writable).count();
    let written = outputs * elem * range.points();
    let stream = write_only
        && match t.streaming {
            Streaming::On => true,
            Streaming::Off => false,
            Streaming::Auto if D == 3 => written > llc.min(threads.max(1) * (l2 + (4 << 20))),
            Streaming::Auto => written > llc,
        };
    let spans = spans(info, axes);
    let block = match D {
        3 => tile(len, &spans, elem, outputs, stream, l2 / 2, threads, t.block),
        2 => {
            let rows = if t.block[1] > 0 { t.block[1] } else { len[1].div_ceil(8 * threads.max(1)).max(1) };
            [len[0], rows, 1]
        }
        _ => [len[0], 1, 1],
    };
    Plan { block, stream, flush_denormals: t.flush_denormals }
}

/// The 3D tile: the model of the module docs, with the non-zero slots of `fixed` imposed.
#[allow(clippy::too_many_arguments)]
fn tile(
    len: [usize; 3],
    spans: &[[usize; 3]],
    elem: usize,
    outputs: usize,
    stream: bool,
    budget: usize,
    threads: usize,
    fixed: [usize; 3],
) -> [usize; 3] {
    let threads = threads.max(1);
    let line = 64 / elem.max(1);
    let live = |bc: usize, bm: usize| -> usize {
        spans.iter().map(|s| (s[2] + 1) * (bm + s[1]) * (bc + s[0]).next_multiple_of(line) * elem).sum()
    };
    let halvings = |n: usize, min: usize| -> Vec<usize> {
        let mut v = vec![n];
        let mut b = n / 2;
        while b >= min.max(1) {
            v.push(b);
            b /= 2;
        }
        v
    };
    let imposed =
        |axis: usize, v: Vec<usize>| if fixed[axis] > 0 { vec![fixed[axis].min(len[axis]).max(1)] } else { v };
    // Rows are cut only if a one-row tile of whole rows does not fit: a cut row breaks the
    // hardware prefetcher's streams and adds a call per piece.
    let bcs = imposed(0, if live(len[0], 1) <= budget { vec![len[0]] } else { halvings(len[0], 4 * line) });
    let bms = imposed(1, halvings(len[1], 1));
    let write_bytes = (outputs * elem) as f64 * if stream { 1.0 } else { 2.0 };
    let mut best = ([len[0], len[1].min(16), len[2]], f64::INFINITY);
    for &bc in &bcs {
        for &bm in &bms {
            if live(bc, bm) > budget && !(fixed[0] > 0 && fixed[1] > 0) {
                continue;
            }
            let tiles = len[0].div_ceil(bc) * len[1].div_ceil(bm);
            let span_o = spans.iter().map(|s| s[2]).max().unwrap_or(0);
            let chunks = if fixed[2] > 0 {
                len[2].div_ceil(fixed[2])
            } else {
                // Eight tasks per thread (rayon's stealing then evens out a thread slowed by
                // other work), outer chunks no thinner than 8 reaches.
                (8 * threads).div_ceil(tiles).clamp(1, (len[2] / (8 * span_o.max(1))).max(1))
            };
            let bo = len[2].div_ceil(chunks);
            let reads: f64 = spans
                .iter()
                .map(|s| {
                    let c = (bc + s[0]).next_multiple_of(line) as f64 / bc as f64;
                    let m = (bm + s[1]) as f64 / bm as f64;
                    let o = (bo + s[2]) as f64 / bo as f64;
                    elem as f64 * c * m * o
                })
                .sum();
            let tasks = tiles * len[2].div_ceil(bo);
            let balance = tasks as f64 / (tasks.div_ceil(threads) * threads) as f64;
            let cost = (reads + write_bytes) / balance;
            if cost < best.1 * 0.999 {
                best = ([bc, bm, bo], cost);
            }
        }
    }
    best.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_fit_and_cover() {
        let star = [[8, 8, 8], [0, 0, 0], [0, 0, 0]];
        for threads in [1, 2, 16] {
            let b = tile([256, 256, 256], &star, 4, 1, true, 1 << 20, threads, [0; 3]);
            assert!(b.iter().zip([256; 3]).all(|(b, n)| *b >= 1 && *b <= n), "{b:?}");
            let live = 9 * (b[1] + 8) * (b[0] + 8).next_multiple_of(16) * 4;
            assert!(live <= 1 << 20, "{b:?} keeps {live} bytes live");
        }
        assert_eq!(tile([10, 7, 5], &star, 8, 1, false, 1 << 20, 2, [3, 2, 1]), [3, 2, 1]);
    }
}
