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
//! write-allocate). Among the tiles whose live planes fit in half an L2, and that cut a plane
//! into at least half as many tiles as there are threads (on more than four threads, so the
//! threads work within two chunks of the outer axis at a time), it takes the one that moves the
//! fewest bytes, divided by how evenly the tasks fill the threads; the outer axis is cut into
//! chunks until there are about eight tasks per thread (chunks no thinner than 8 reaches, or on
//! more than four threads 16 planes and 2 reaches). Where the fields stream from memory on more
//! than four threads, a tile count per plane that is a multiple of the threads counts no outer
//! halo: each thread then carries one column of tiles from chunk to chunk (tasks go to seats in
//! order) and finds that halo in its own L2. Rows are cut along the contiguous
//! axis only when even a one-row tile would not fit. The cache sizes are read at run time
//! ([`caches`]: Linux's sysfs, else cpuid, else constants), so a CPU with a small L2 (AMD Zen 3:
//! 512 KiB) gets thinner tiles than one with 2 MiB.

use crate::field::Shape;
use crate::range::Loop;
use crate::stencil::StencilInfo;
use std::sync::{OnceLock, RwLock};

/// Whether written fields are stored with non-temporal (streaming) stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Streaming {
    /// When the launch's working set (every field it reads or writes, over its range) exceeds
    /// the cache this process can count on (with the cache sizes read at run time: [`caches`]):
    /// the outputs go to memory anyway, streaming saves reading their lines first, and output
    /// lines no longer evict the planes a tile keeps in L2. 3D launches count each thread's L2
    /// and share of the last level (up to 16 MiB per thread, at most 7/8 of it), but at least
    /// [`Caches::LLC_FLOOR`] of a large one; 1D and 2D launches (which keep only `2r + 1`
    /// rows for reuse) the whole last level, since it then keeps ordinary stores' lines for the
    /// next sweep. (Measured on a 2-vCPU VM reporting a 480 MiB L3: streaming doubled the 3D
    /// 25-point update on 256³ and halved the 2D one on 4096², whose fields stay in that L3.)
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

/// The caches the plan sizes tiles and picks stores by, read at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Caches {
    /// L2 bytes of one core.
    pub l2: usize,
    /// Last-level cache bytes (one instance, as the CPU reports it).
    pub llc: usize,
    /// CPUs sharing one last-level cache instance (as reported; at least 1).
    pub llc_sharers: usize,
}

impl Caches {
    /// Used where neither sysfs nor cpuid says anything: 1 MiB of L2, 32 MiB of L3 for 8 CPUs.
    const FALLBACK: Caches = Caches { l2: 1 << 20, llc: 32 << 20, llc_sharers: 8 };

    /// The cache a process of `threads` threads can count on: each thread's L2 plus its share of
    /// the last level (the reported size over the CPUs sharing it, at most 4 MiB: what one core
    /// of a server CPU owns, since a virtual machine reports its host's whole last level, shared
    /// with CPUs it does not see), but at least half the last level up to
    /// [`Caches::LLC_FLOOR`], and at most the whole last level. (Half, not a quarter: on a
    /// 2-vCPU AMD EPYC (Zen 4) reporting a 32 MiB L3, S1's 16 MiB at 128³ ran 1.4–1.6 times
    /// faster on one thread and 1.6–1.7 times on two with ordinary stores than streamed, while
    /// 54 and 128 MiB ran 1.1–1.3 times faster streamed.)
    pub fn llc_share(&self, threads: usize) -> usize {
        self.llc.min(self.share(threads, 4 << 20))
    }

    /// What streaming stores are chosen against: [`Caches::llc_share`] with up to 16 MiB of the
    /// last level per thread where it reports that much per CPU, at most 7/8 of it. On a 16-CPU
    /// virtual machine of an Intel Xeon reporting 300 MiB for 16 CPUs, S1 at 256³ ran faster
    /// with ordinary stores than streamed in two sittings of three (16 threads: 128 MiB in f32
    /// 1.05–1.70 times, 256 MiB in f64 1.05–1.44 times; 8 threads, f32: 1.47–1.77 times; the
    /// fields stay in the last level between steps), level in the third; its 512 MiB in f64
    /// streamed faster. 2-vCPU machines keep their measured choices: 40 MiB (the floor) on one
    /// reporting 260 MiB, and 28 MiB of a 32 MiB L3, under which 32 MiB still streams.
    pub(crate) fn stream_share(&self, threads: usize) -> usize {
        (self.llc / 8 * 7).min(self.share(threads, 16 << 20))
    }

    /// Each thread's L2 and its share of the last level (the reported size over the CPUs
    /// sharing it, at most `cap`), at least half the last level up to [`Caches::LLC_FLOOR`].
    fn share(&self, threads: usize, cap: usize) -> usize {
        let per_cpu = (self.llc / self.llc_sharers.max(1)).min(cap);
        let floor = (self.llc / 2).min(Self::LLC_FLOOR);
        (threads.max(1) * (self.l2 + per_cpu)).max(floor)
    }

    /// What a process can count on of a large last level whatever its thread count: measured on
    /// a 2-vCPU virtual machine of an Intel Xeon reporting a 260 MiB L3, 3D working sets of 16 and
    /// 32 MiB ran 1.6 and 2.2 times faster with ordinary stores than streamed (they stay in the L3
    /// between sweeps), 31 MiB 1.4 times; at 54 to 62 MiB the two were level, at 108 MiB and more
    /// streaming won.
    pub const LLC_FLOOR: usize = 40 << 20;

    /// From cache entries (level, type, size in bytes, CPUs sharing it), as sysfs or cpuid list
    /// them: the largest L2 and the largest last level (L3, else L2); [`Caches::FALLBACK`]'s
    /// values where an entry is missing.
    fn from_entries(entries: &[CacheEntry]) -> Caches {
        let best = |level: u32| {
            entries
                .iter()
                .filter(|e| e.0 == level && e.1 != CacheKind::Instruction && e.2 > 0)
                .max_by_key(|e| e.2)
                .map(|e| (e.2, e.3.max(1)))
        };
        let l2 = best(2).map_or(Caches::FALLBACK.l2, |e| e.0);
        let (llc, llc_sharers) = best(3)
            .or(best(2).map(|(b, _)| (b, 1)))
            .unwrap_or((Caches::FALLBACK.llc.max(l2), Caches::FALLBACK.llc_sharers));
        Caches { l2, llc, llc_sharers }
    }
}

/// What a cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum CacheKind {
    /// Data only.
    Data,
    /// Instructions only.
    Instruction,
    /// Both.
    Unified,
}

/// Parses a sysfs cache size (`48K`, `1280K`, `32M`, bytes otherwise; a trailing `B` or `iB`
/// is allowed). 0 for anything else.
fn parse_size(size: &str) -> usize {
    let size = size.trim();
    let size = size.strip_suffix("iB").or_else(|| size.strip_suffix('B')).unwrap_or(size);
    let (digits, shift) = match size.as_bytes().last() {
        Some(b'K') => (&size[..size.len() - 1], 10),
        Some(b'M') => (&size[..size.len() - 1], 20),
        Some(b'G') => (&size[..size.len() - 1], 30),
        _ => (size, 0),
    };
    digits.trim().parse::<usize>().ok().and_then(|d| d.checked_mul(1 << shift)).unwrap_or(0)
}

/// Counts the CPUs of a sysfs CPU list (`0-3,8,10-11`).
fn count_cpus(list: &str) -> usize {
    list.trim()
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('-') {
            Some((a, b)) => b.trim().parse::<usize>().unwrap_or(0).saturating_sub(a.trim().parse().unwrap_or(0)) + 1,
            None => 1,
        })
        .sum()
}

/// One cache as sysfs or cpuid lists it: level, type, size in bytes, CPUs sharing it.
type CacheEntry = (u32, CacheKind, usize, usize);

/// Cache entries of the CPU whose sysfs directory is `cpu_dir` (`/sys/devices/system/cpu/cpu0`
/// on Linux): its `cache/index*/{level,type,size,shared_cpu_list}`. Entries whose level or size
/// is missing or unreadable are left out; empty where the directory is missing.
fn sysfs_entries(cpu_dir: &std::path::Path) -> Vec<CacheEntry> {
    let Ok(dirs) = std::fs::read_dir(cpu_dir.join("cache")) else { return Vec::new() };
    let mut indexed: Vec<(usize, std::path::PathBuf)> = dirs
        .filter_map(|d| d.ok())
        .filter_map(|d| {
            let index = d.file_name().to_str()?.strip_prefix("index")?.parse().ok()?;
            Some((index, d.path()))
        })
        .collect();
    indexed.sort();
    let mut entries = Vec::new();
    for (_, dir) in indexed {
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
        let (Some(level), Some(size)) = (read("level"), read("size")) else { continue };
        let (Ok(level), size) = (level.trim().parse::<u32>(), parse_size(&size)) else { continue };
        if size == 0 {
            continue;
        }
        let kind = match read("type").as_deref().map(str::trim) {
            Some("Instruction") => CacheKind::Instruction,
            Some("Data") => CacheKind::Data,
            _ => CacheKind::Unified,
        };
        let sharers = read("shared_cpu_list").map_or(1, |l| count_cpus(&l).max(1));
        entries.push((level, kind, size, sharers));
    }
    entries
}

/// Cache entries from cpuid's deterministic cache parameters (leaf 4 on Intel, 0x8000_001D on
/// AMD): where sysfs is missing (not Linux, or a container hiding it).
fn cpuid_entries() -> Vec<CacheEntry> {
    #[cfg(target_arch = "x86_64")]
    {
        // `__cpuid_count` is a safe function in newer Rust, an unsafe one in older (our MSRV).
        #[allow(unused_unsafe)]
        let cpuid = |leaf: u32, sub: u32| {
            // SAFETY: cpuid exists on every x86-64 CPU; leaves past the maximum return zeros.
            unsafe { std::arch::x86_64::__cpuid_count(leaf, sub) }
        };
        let max = cpuid(0, 0).eax;
        let max_ext = cpuid(0x8000_0000, 0).eax;
        let leaf = if max >= 4 && cpuid(4, 0).eax & 0x1f != 0 {
            4
        } else if max_ext >= 0x8000_001D {
            0x8000_001D
        } else {
            return Vec::new();
        };
        let mut entries = Vec::new();
        for sub in 0..16 {
            let r = cpuid(leaf, sub);
            let kind = match r.eax & 0x1f {
                0 => break,
                1 => CacheKind::Data,
                2 => CacheKind::Instruction,
                _ => CacheKind::Unified,
            };
            let level = (r.eax >> 5) & 0x7;
            let sharers = ((r.eax >> 14) & 0xfff) as usize + 1;
            let ways = ((r.ebx >> 22) & 0x3ff) as usize + 1;
            let partitions = ((r.ebx >> 12) & 0x3ff) as usize + 1;
            let line = (r.ebx & 0xfff) as usize + 1;
            let sets = r.ecx as usize + 1;
            entries.push((level, kind, ways * partitions * line * sets, sharers));
        }
        entries
    }
    #[cfg(not(target_arch = "x86_64"))]
    Vec::new()
}

/// Where [`caches`] found the sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CacheSource {
    /// Linux's sysfs.
    Sysfs,
    /// cpuid's deterministic cache parameters.
    Cpuid,
    /// Neither said anything about an L2 or a last level: [`Caches::FALLBACK`].
    Fallback,
}

/// The caches of the CPU whose sysfs directory is `cpu_dir`, else from `cpuid` (called only when
/// sysfs lists no L2 or L3), else [`Caches::FALLBACK`].
fn detect(cpu_dir: &std::path::Path, cpuid: impl FnOnce() -> Vec<CacheEntry>) -> (Caches, CacheSource) {
    let usable = |entries: &[CacheEntry]| entries.iter().any(|e| e.0 >= 2 && e.1 != CacheKind::Instruction);
    let entries = sysfs_entries(cpu_dir);
    if usable(&entries) {
        return (Caches::from_entries(&entries), CacheSource::Sysfs);
    }
    let entries = cpuid();
    if usable(&entries) {
        return (Caches::from_entries(&entries), CacheSource::Cpuid);
    }
    (Caches::FALLBACK, CacheSource::Fallback)
}

/// [`caches`] and where they were read.
pub(crate) fn caches_and_source() -> (Caches, CacheSource) {
    static CACHES: OnceLock<(Caches, CacheSource)> = OnceLock::new();
    *CACHES.get_or_init(|| detect(std::path::Path::new("/sys/devices/system/cpu/cpu0"), cpuid_entries))
}

/// This CPU's caches: from Linux's sysfs, else from cpuid, else 1 MiB of L2 and 32 MiB of L3 for
/// 8 CPUs (read once). `STENCIL_CPU_L2` and `STENCIL_CPU_LLC` ([`Tuning`]) override these
/// sizes in launches' plans; this function reports what the CPU said. `STENCIL_CPU_VERBOSE=1`
/// prints, with every launch's plan, these sizes and where they were read.
pub fn caches() -> Caches {
    caches_and_source().0
}

/// Cache sizes in bytes: L2 per core and the last level ([`caches`]).
pub fn cache_sizes() -> (usize, usize) {
    let c = caches();
    (c.l2, c.llc)
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
    let mut c = caches();
    if t.l2_bytes > 0 {
        c.l2 = t.l2_bytes;
    }
    if t.llc_bytes > 0 {
        c.llc = t.llc_bytes;
    }
    plan_with(range, shape, info, elem, write_only, threads, &t, &c)
}

/// Whether outputs stream under [`Streaming::Auto`]: `working_set` bytes (every field the launch
/// reads or writes, over the range) against the last level this process can count on
/// ([`Caches::stream_share`]). In 3D the budget is also held to each thread's L2 plus its share of
/// the last level, since the planes a tile keeps live must survive the output lines. 1D and 2D
/// launches (which keep only `2r + 1` rows for reuse) stream only when the working set exceeds
/// the whole last level.
fn stream_auto(dims: usize, working_set: usize, caches: &Caches, threads: usize) -> bool {
    if dims == 3 {
        working_set > caches.stream_share(threads)
    } else {
        working_set > caches.llc
    }
}

/// [`plan`] with the tuning and the caches given (not read from the process).
#[allow(clippy::too_many_arguments)]
fn plan_with<const D: usize>(
    range: &Loop<D>,
    shape: &Shape<D>,
    info: &StencilInfo,
    elem: usize,
    write_only: bool,
    threads: usize,
    t: &Tuning,
    caches: &Caches,
) -> Plan {
    let l2 = caches.l2;
    let axes = shape.element_order().axes::<D>();
    let n = range.len_per_axis();
    let mut len = [1usize; 3];
    for (slot, &a) in len.iter_mut().zip(axes.iter()) {
        *slot = n[a];
    }
    let outputs = info.fields.iter().filter(|f| f.writable).count();
    let working_set = info.fields.len() * elem * range.points();
    let stream = write_only
        && match t.streaming {
            Streaming::On => true,
            Streaming::Off => false,
            Streaming::Auto => stream_auto(D, working_set, caches, threads),
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
    // Tasks go to the threads in order, a plane's tiles first, so a round of tasks spans
    // `threads / tiles` chunks of the outer axis: on more than four threads, at least half as
    // many tiles per plane as threads keeps the threads within two chunks, where tiles of whole
    // planes would spread one per thread over the whole range (measured 1.4-1.8 times slower on
    // 16 threads at 256³, fields in the last level; four chunks ran f64 5-11% slower than two).
    // Where no tile that fits has that many, any that fits.
    let window = if threads > 4 { threads.div_ceil(2) } else { 1 };
    let spread = |bc: usize, bm: usize| len[0].div_ceil(bc) * len[1].div_ceil(bm) < window;
    // Outer chunks no thinner than 8 reaches of the outer axis; on more than four threads no
    // thinner than 16 planes and 2 reaches, so that a wide star gets several tasks per thread
    // too: with two (the 25-point star's 64-plane chunks on 16 threads at 256³) a thread slowed
    // by the SMT sibling sharing its core held each launch (16-plane chunks ran it 1.10-1.22
    // times faster on a 16-CPU Xeon; the 7-point star keeps its 16).
    let span_o = spans.iter().map(|s| s[2]).max().unwrap_or(0).max(1);
    let thinnest = if threads > 4 { (8 * span_o).min((2 * span_o).max(16)) } else { 8 * span_o };
    // A tile imposed along both axes of the plane is taken as it is.
    let forced = fixed[0] > 0 && fixed[1] > 0;
    let any_compact = forced || bcs.iter().any(|&bc| bms.iter().any(|&bm| live(bc, bm) <= budget && !spread(bc, bm)));
    for &bc in &bcs {
        for &bm in &bms {
            if !forced && (live(bc, bm) > budget || any_compact && spread(bc, bm)) {
                continue;
            }
            let tiles = len[0].div_ceil(bc) * len[1].div_ceil(bm);
            let chunks = if fixed[2] > 0 {
                len[2].div_ceil(fixed[2])
            } else {
                // Eight tasks per thread (a thread slowed by other work then gives some away),
                // outer chunks no thinner than `thinnest`.
                (8 * threads).div_ceil(tiles).clamp(1, (len[2] / thinnest).max(1))
            };
            let bo = len[2].div_ceil(chunks);
            // Tasks go to seats in order, so with a multiple of the threads' tiles per plane each
            // thread carries one column of tiles from chunk to chunk and finds the planes its
            // last task read, the next one's outer halo, in its own L2. That matters where the
            // fields stream from memory, on more than four threads: the 25-point star in f64 on
            // 256³ and 16 threads ran 1.07 times faster with 16-row tiles (16 per plane, one
            // column per thread) than with 32 (eight per plane) in each of five rounds; with the
            // fields in the last level, where the halo comes from there, 16 rows ran no faster.
            let carried = stream && threads > 4 && tiles % threads == 0;
            let reads: f64 = spans
                .iter()
                .map(|s| {
                    let c = (bc + s[0]).next_multiple_of(line) as f64 / bc as f64;
                    let m = (bm + s[1]) as f64 / bm as f64;
                    let o = if carried { 1.0 } else { (bo + s[2]) as f64 / bo as f64 };
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

    /// On 16 threads a plane is cut into at least eight tiles, so a round of tasks (a plane's tiles
    /// first) stays within two chunks of the outer axis: the 7-point star on 256³ f32 with 2 MiB
    /// of L2 took whole planes, one chunk per thread over the whole range, before. A plane too
    /// small to cut takes a tile that fits anyway.
    #[test]
    fn threads_work_within_a_few_chunks() {
        let star7 = [[2, 2, 2], [0, 0, 0]];
        let per_plane = |b: [usize; 3], len: [usize; 3]| len[0].div_ceil(b[0]) * len[1].div_ceil(b[1]);
        let cube = [256; 3];
        for (threads, elem) in [(16, 4), (16, 8), (64, 4), (8, 8)] {
            let b = tile(cube, &star7, elem, 1, false, 1 << 20, threads, [0; 3]);
            assert!(per_plane(b, cube) * 2 >= threads, "{threads} threads, {elem}-byte points: {b:?}");
        }
        assert_eq!(tile(cube, &star7, 4, 1, false, 1 << 20, 16, [0; 3]), [256, 32, 16]);
        let thin = [8, 2, 4096];
        let b = tile(thin, &star7, 4, 1, false, 1 << 20, 64, [0; 3]);
        assert!(b.iter().zip(thin).all(|(b, n)| *b >= 1 && *b <= n), "{b:?}");
        // Imposed tiles are kept whatever the count of threads.
        assert_eq!(tile(cube, &star7, 4, 1, false, 1 << 20, 16, [256, 256, 16]), [256, 256, 16]);
    }

    /// On many threads the 25-point star (reach 8 along the outer axis) gets several tasks per
    /// thread: its chunks were 64 planes thick, two tasks per thread on 16 threads at 256³. On two
    /// threads chunks stay at least 8 reaches thick; the 7-point star keeps 16-plane chunks.
    #[test]
    fn wide_stars_get_several_tasks_per_thread() {
        let star25 = [[8, 8, 8], [0, 0, 0], [0, 0, 0]];
        let star7 = [[2, 2, 2], [0, 0, 0]];
        let tasks = |b: [usize; 3], len: [usize; 3]| (0..3).map(|a| len[a].div_ceil(b[a])).product::<usize>();
        for n in [128, 256] {
            let cube = [n; 3];
            let b = tile(cube, &star25, 4, 1, false, 1 << 20, 16, [0; 3]);
            assert!(tasks(b, cube) >= 4 * 16, "{n}³ on 16 threads: {b:?}");
            assert!(b[2] >= 16, "{n}³ on 16 threads: {b:?}");
            assert!(tile(cube, &star25, 4, 1, false, 1 << 20, 2, [0; 3])[2] >= 64, "{n}³ on 2 threads");
            assert_eq!(tile(cube, &star7, 4, 1, false, 1 << 20, 16, [0; 3])[2], 16, "{n}³, 7-point");
        }
    }

    /// Where the fields stream from memory on more than four threads, a tile count per plane that
    /// is a multiple of the threads wins (each thread carries a column of tiles through the
    /// chunks, the outer halo from its own L2): the 25-point star in f64 on 256³ and 16 threads
    /// takes 16-row tiles, where it took 32 (eight per plane). Fields in the cache, and two
    /// threads, keep the tiles they had.
    #[test]
    fn streamed_fields_take_one_column_of_tiles_per_thread() {
        let star25 = [[8, 8, 8], [0, 0, 0], [0, 0, 0]];
        let cube = [256; 3];
        let streamed = tile(cube, &star25, 8, 1, true, 1 << 20, 16, [0; 3]);
        assert_eq!(streamed, [256, 16, 32]);
        assert_eq!(tile(cube, &star25, 8, 1, false, 1 << 20, 16, [0; 3]), [256, 32, 16]);
        // 8, 16 and 32 tiles per plane fit: each thread count takes a multiple of itself.
        for threads in [8, 16, 32] {
            let b = tile(cube, &star25, 8, 1, true, 1 << 20, threads, [0; 3]);
            let per_plane = cube[0].div_ceil(b[0]) * cube[1].div_ceil(b[1]);
            assert_eq!(per_plane % threads, 0, "{threads} threads: {b:?}");
        }
        assert_eq!(
            tile(cube, &star25, 8, 1, true, 1 << 20, 2, [0; 3]),
            tile(cube, &star25, 8, 1, false, 1 << 20, 2, [0; 3]),
            "two threads"
        );
    }

    fn star25_info() -> StencilInfo {
        use crate::stencil::FieldInfo;
        let field = |name: &'static str, r: i32, writable| FieldInfo { name, lo: [-r; 3], hi: [r; 3], writable };
        StencilInfo {
            name: "star25",
            fields: vec![field("u", 4, false), field("u_prev", 0, false), field("v2", 0, false), field("out", 0, true)]
                .leak(),
        }
    }

    /// Zen 3 (512 KiB L2, 32 MiB L3 for 8 cores), Ice Lake server (1.25 MiB, 48 MiB), Sapphire
    /// Rapids in a VM (2 MiB, 300 MiB reported for 16 CPUs).
    const ZEN3: Caches = Caches { l2: 512 << 10, llc: 32 << 20, llc_sharers: 8 };
    const ICX: Caches = Caches { l2: 1280 << 10, llc: 48 << 20, llc_sharers: 2 };
    const SPR: Caches = Caches { l2: 2 << 20, llc: 300 << 20, llc_sharers: 16 };

    #[test]
    fn tiles_follow_the_injected_l2() {
        let shape = Shape::new([256, 256, 256]).halo(4);
        let range = Loop::interior(&shape);
        let info = star25_info();
        let t = Tuning::default();
        let mut rows = Vec::new();
        for c in [ZEN3, ICX, SPR] {
            let p = plan_with(&range, &shape, &info, 4, true, 2, &t, &c);
            let [bc, bm, _] = p.block;
            // The live planes of u (9 planes of bm + 8 rows) and one row band of the others fit
            // in half the L2.
            let live = 9 * (bm + 8) * (bc + 8).next_multiple_of(16) * 4 + 2 * bm * bc.next_multiple_of(16) * 4;
            assert!(live <= c.l2 / 2, "{c:?}: tile {:?} keeps {live} bytes live", p.block);
            rows.push(bm);
        }
        // A smaller L2, a thinner tile.
        assert!(rows[0] < rows[1] && rows[1] <= rows[2], "rows per tile {rows:?}");
        // The Tuning's sizes replace the detected ones in `plan` (here: passed in directly).
        let small = Caches { l2: 256 << 10, ..SPR };
        let p = plan_with(&range, &shape, &info, 4, true, 2, &t, &small);
        assert!(p.block[1] < rows[2], "{:?}", p.block);
    }

    #[test]
    fn streaming_follows_the_working_set_against_the_injected_last_level() {
        let info = star25_info();
        let t = Tuning::default();
        // 4 fields of 128³ f32: 32 MiB of working set (plus halos, not counted).
        let shape = Shape::new([128, 128, 128]).halo(4);
        let range = Loop::interior(&shape);
        // 2 threads: Zen 3 counts 2 × (512 KiB + 4 MiB), at least half its 32 MiB: 32 MiB
        // streams. A CPU reporting 64 MiB per core (no cap would keep all of it) still counts
        // 4 MiB per thread, but at least half its last level up to 40 MiB: 32 MiB of 128 stay.
        assert!(plan_with(&range, &shape, &info, 4, true, 2, &t, &ZEN3).stream);
        let big = Caches { l2: 2 << 20, llc: 128 << 20, llc_sharers: 2 };
        assert!(!plan_with(&range, &shape, &info, 4, true, 2, &t, &big).stream);
        let bigger = Shape::new([144, 144, 144]).halo(4);
        assert!(plan_with(&Loop::interior(&bigger), &bigger, &info, 4, true, 2, &t, &big).stream);
        // A 2-vCPU machine reporting 260 MiB: 40 MiB (the floor) on 1 and 2 threads, so 32 MiB
        // stays and 108 MiB (192³) streams.
        let emr = Caches { l2: 2 << 20, llc: 260 << 20, llc_sharers: 2 };
        assert_eq!((emr.llc_share(1), emr.llc_share(2)), (40 << 20, 40 << 20));
        assert!(!plan_with(&range, &shape, &info, 4, true, 1, &t, &emr).stream);
        let large = Shape::new([192, 192, 192]).halo(4);
        assert!(plan_with(&Loop::interior(&large), &large, &info, 4, true, 2, &t, &emr).stream);
        // The 16-CPU machine (300 MiB for 16) at 256³, 2 fields: 16 × (2 + 16) MiB, at most 7/8
        // of 300 MiB, hold 128 MiB in f32 and 256 MiB in f64 on 16 threads (8 × 18 MiB the f32
        // on 8), 40 MiB on one thread do not; 512 MiB (the 25-point star's 4 fields in f64)
        // stream on 16 threads too.
        let s1 = {
            use crate::stencil::FieldInfo;
            let f = FieldInfo { name: "f", lo: [-1; 3], hi: [1; 3], writable: false };
            StencilInfo { name: "diffusion", fields: vec![f, FieldInfo { name: "f_new", writable: true, ..f }].leak() }
        };
        let huge = Shape::new([256, 256, 256]).halo(4);
        let huge_plan = |elem: usize, info: &StencilInfo, threads| {
            plan_with(&Loop::interior(&huge), &huge, info, elem, true, threads, &t, &SPR).stream
        };
        assert!(huge_plan(4, &s1, 1));
        assert!(!huge_plan(4, &s1, 8) && !huge_plan(4, &s1, 16) && !huge_plan(8, &s1, 16));
        assert!(huge_plan(8, &s1, 8) && huge_plan(8, &info, 16));
        assert_eq!((SPR.stream_share(16), SPR.llc_share(16)), ((300 << 20) / 8 * 7, 96 << 20));
        // 16 threads of the 16-CPU machine: 16 × (2 + 4) MiB = 96 MiB hold 32 MiB: no streaming.
        assert!(!plan_with(&range, &shape, &info, 4, true, 16, &t, &SPR).stream);
        // The 2-vCPU Zen 4 reporting 32 MiB for both: S1 at 128³ (16 MiB) stays on 1 and 2
        // threads, 192³ (54 MiB) streams.
        let zen4 = Caches { l2: 1 << 20, llc: 32 << 20, llc_sharers: 2 };
        let (cube, wide) = (Shape::new([128; 3]).halo(1), Shape::new([192; 3]).halo(1));
        for threads in [1, 2] {
            assert!(!plan_with(&Loop::interior(&cube), &cube, &s1, 4, true, threads, &t, &zen4).stream);
            assert!(plan_with(&Loop::interior(&wide), &wide, &s1, 4, true, threads, &t, &zen4).stream);
        }
        // 64³: 4 MiB of working set fits everywhere.
        let small = Shape::new([64, 64, 64]).halo(4);
        assert!(!plan_with(&Loop::interior(&small), &small, &info, 4, true, 2, &t, &ZEN3).stream);
        // A read-modify-write launch never streams; `On` and `Off` are obeyed.
        assert!(!plan_with(&range, &shape, &info, 4, false, 2, &t, &ZEN3).stream);
        let off = Tuning { streaming: Streaming::Off, ..t };
        assert!(!plan_with(&range, &shape, &info, 4, true, 2, &off, &ZEN3).stream);
        let on = Tuning { streaming: Streaming::On, ..t };
        assert!(plan_with(&Loop::interior(&small), &small, &info, 4, true, 2, &on, &SPR).stream);
        // 2D: the whole last level counts.
        assert!(!stream_auto(2, 40 << 20, &ICX, 2) && stream_auto(2, 49 << 20, &ICX, 2));
        assert!(stream_auto(3, 40 << 20, &ICX, 2));
    }

    #[test]
    fn caches_from_entries_sizes_and_sharing() {
        use CacheKind::*;
        assert_eq!(parse_size("48K"), 48 << 10);
        assert_eq!(parse_size("1280K\n"), 1280 << 10);
        assert_eq!(parse_size("32M"), 32 << 20);
        assert_eq!(parse_size("4096"), 4096);
        assert_eq!(parse_size("512 KiB"), 512 << 10);
        assert_eq!(parse_size("2MB"), 2 << 20);
        for bad in ["", "K", "abc", "-4K", "1.5M", "99999999999999999999G"] {
            assert_eq!(parse_size(bad), 0, "{bad:?}");
        }
        assert_eq!(count_cpus("0-1\n"), 2);
        assert_eq!(count_cpus("0-3,8,10-11"), 7);
        let zen3 = [
            (1, Data, 32 << 10, 2),
            (1, Instruction, 32 << 10, 2),
            (2, Unified, 512 << 10, 2),
            (3, Unified, 32 << 20, 16),
        ];
        assert_eq!(Caches::from_entries(&zen3), Caches { l2: 512 << 10, llc: 32 << 20, llc_sharers: 16 });
        // No L3: the L2 is the last level; nothing at all: the fallback.
        let no_l3 = [(1, Data, 64 << 10, 1), (2, Unified, 4 << 20, 4)];
        assert_eq!(Caches::from_entries(&no_l3), Caches { l2: 4 << 20, llc: 4 << 20, llc_sharers: 1 });
        assert_eq!(Caches::from_entries(&[]), Caches::FALLBACK);
        // What this machine reports (sysfs or cpuid) is plausible.
        let c = caches();
        assert!(c.l2 >= 64 << 10 && c.llc >= c.l2 && c.llc_sharers >= 1, "{c:?}");
        assert!(c.llc_share(1) <= c.llc && c.llc_share(1) >= c.l2);
    }

    /// One fake `cache/index*` directory: index, then the contents of `level`, `type`, `size`
    /// and `shared_cpu_list` (`None`: the file is left out).
    type FakeCache<'a> = (u32, Option<&'a str>, Option<&'a str>, Option<&'a str>, Option<&'a str>);

    /// A fake sysfs CPU directory under the temp dir holding `caches`.
    fn fake_sysfs(name: &str, caches: &[FakeCache<'_>]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("stencil-sysfs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for &(index, level, kind, size, shared) in caches {
            let d = dir.join(format!("cache/index{index}"));
            std::fs::create_dir_all(&d).expect("temp dir");
            for (file, value) in [("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)] {
                if let Some(v) = value {
                    std::fs::write(d.join(file), format!("{v}\n")).expect("temp file");
                }
            }
        }
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn caches_from_a_fake_sysfs_else_cpuid_else_the_fallback() {
        use CacheKind::*;
        let no_cpuid = Vec::new;
        // Ice Lake server in a 2-vCPU VM (what `/sys/devices/system/cpu/cpu0` lists there), the
        // index directories listed out of order and one past 9.
        let icx = fake_sysfs(
            "icx",
            &[
                (3, Some("3"), Some("Unified"), Some("49152K"), Some("0-1")),
                (0, Some("1"), Some("Data"), Some("48K"), Some("0")),
                (1, Some("1"), Some("Instruction"), Some("32K"), Some("0")),
                (2, Some("2"), Some("Unified"), Some("1280K"), Some("0")),
            ],
        );
        let want = Caches { l2: 1280 << 10, llc: 48 << 20, llc_sharers: 2 };
        assert_eq!(detect(&icx, no_cpuid), (want, CacheSource::Sysfs));
        // Zen 3: 512 KiB of L2 per core, 32 MiB of L3 shared by 8 cores with SMT; the L3 at
        // index 10; a file that cannot be parsed and one that is missing are skipped.
        let zen3 = fake_sysfs(
            "zen3",
            &[
                (0, Some("1"), Some("Data"), Some("32K"), Some("0,64")),
                (2, Some("2"), Some("Unified"), Some("512K"), Some("0,64")),
                (4, Some("two"), Some("Unified"), Some("8M"), None),
                (5, Some("2"), Some("Unified"), None, None),
                (10, Some("3"), Some("Unified"), Some("32768K"), Some("0-7,64-71")),
            ],
        );
        let want = Caches { l2: 512 << 10, llc: 32 << 20, llc_sharers: 16 };
        assert_eq!(detect(&zen3, no_cpuid), (want, CacheSource::Sysfs));
        // An L2 and no L3: the L2 is the last level, private.
        let l2_only = fake_sysfs(
            "l2",
            &[(0, Some("1"), Some("Data"), Some("64K"), None), (1, Some("2"), None, Some("4M"), None)],
        );
        assert_eq!(detect(&l2_only, no_cpuid).0, Caches { l2: 4 << 20, llc: 4 << 20, llc_sharers: 1 });
        // Sysfs missing, or listing only an L1 or only garbage: cpuid's entries, and where cpuid
        // says nothing either, the fallback (1 MiB of L2, 32 MiB of L3 for 8 CPUs).
        let missing = std::env::temp_dir().join(format!("stencil-sysfs-none-{}", std::process::id()));
        let l1_only = fake_sysfs("l1", &[(0, Some("1"), Some("Data"), Some("48K"), Some("0"))]);
        let garbage = fake_sysfs(
            "garbage",
            &[(2, Some("2"), Some("Unified"), Some("lots"), Some("0")), (3, None, None, Some("8M"), None)],
        );
        let cpuid = || vec![(2, Unified, 2 << 20, 2), (3, Unified, 105 << 20, 112)];
        for dir in [&missing, &l1_only, &garbage] {
            let want = Caches { l2: 2 << 20, llc: 105 << 20, llc_sharers: 112 };
            assert_eq!(detect(dir, cpuid), (want, CacheSource::Cpuid), "{dir:?}");
            assert_eq!(detect(dir, no_cpuid), (Caches::FALLBACK, CacheSource::Fallback), "{dir:?}");
        }
        assert_eq!(Caches::FALLBACK, Caches { l2: 1 << 20, llc: 32 << 20, llc_sharers: 8 });
        for dir in [icx, zen3, l2_only, l1_only, garbage] {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
