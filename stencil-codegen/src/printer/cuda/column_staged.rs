//! A column sweep whose column axis is the contiguous one (`Order::Kij`) on the GPU. One thread
//! per column, as in `column.rs`, but there a warp's 32 threads read 32 addresses a column apart
//! at every level: a sector each, of which the thread uses 8 bytes (5% of the copy bandwidth
//! for the column model on an H200). Here each warp stages its 32 columns through shared memory
//! a chunk of levels at a time:
//! 1. the warp loads the chunk's levels of every field it uses (plus the levels the stencil
//!    reads below and above them), each column's levels read by consecutive lanes, so the loads
//!    are runs of contiguous memory;
//! 2. each thread walks its column's levels in the sweep's order, reading and writing the tiles
//!    (a read across columns is a global load, as in `column.rs`);
//! 3. the warp stores the chunk's levels of every written field back, again column by column.
//!
//! A written field's tile is loaded too, so that a level the sweep leaves alone (a conditional
//! store) is stored back unchanged, unless the body stores it at every level. A passed level
//! read at the start of a chunk comes from global memory, where the previous chunk stored it.

use super::c_body::{c_type, print_stmts, Access};
use super::kernel::KernelParts;
use super::CudaKernel;
use crate::analysis::FieldAccess;
use crate::ir::{Stmt, Sweep, SweepOrder};
use crate::naming;
use std::fmt::Write;

/// Warps per block.
const WARPS: u32 = 4;
/// Shared memory per warp at most (bytes): 4 warps use 64 KiB. Measured on the column model
/// (`gpu_bench --columns`, H200): 16 KiB × 4 warps 30.9% of copy for the step, against 22.9–29.1%
/// for 8 KiB × 8, 16 KiB × 8 and 24 KiB × 4, and 10.5–21.3% for 32–64 KiB (longer chunks, fewer
/// warps per multiprocessor).
const WARP_BYTES: u32 = 16 * 1024;
/// Row stride of a tile in elements (33: a warp's reads and writes of a level hit distinct banks).
const ROW: u32 = 33;

/// One field's tile: levels `lo` below and `hi` above the chunk, `ROW` columns per level.
struct Tile<'a> {
    fa: &'a FieldAccess,
    lo: u32,
    hi: u32,
    /// Byte offset in the warp's part of shared memory.
    offset: u32,
    /// Whether the tile is loaded before the walk (read, or stored only on some paths).
    load: bool,
}

impl Tile<'_> {
    fn bytes(&self, chunk: u32) -> u32 {
        (chunk + self.lo + self.hi) * ROW * self.fa.elem.size_bytes() as u32
    }
    fn var(&self) -> String {
        format!("__tile_{}", self.fa.name)
    }
}

/// Reads and writes of the column's own levels go to the tiles, reads across columns to global
/// memory.
struct Staged<'a> {
    k: &'a KernelParts<'a>,
    tiles: &'a [Tile<'a>],
}

impl Access for Staged<'_> {
    fn load(&self, field: usize, offset: [i32; 3]) -> String {
        let l = self.k.geo.layout_offset_of(offset);
        match self.tiles.iter().find(|t| t.fa.param == field) {
            Some(t) if l[1] == 0 && l[2] == 0 => {
                format!("{}[(__row + {}) * {ROW} + __lane]", t.var(), t.lo as i32 + l[0])
            }
            _ => self.k.global_load(field, "idx", offset),
        }
    }
    fn store(&self, field: usize, value: &str) -> String {
        let t = self.tiles.iter().find(|t| t.fa.param == field).expect("a written field has a tile");
        format!("{}[(__row + {}) * {ROW} + __lane] = {value};", t.var(), t.lo)
    }
}

/// The staged kernel, or `None` where the tiles of even 4 levels exceed the shared memory of a
/// warp (then `column.rs` prints its kernel).
pub(super) fn print(k: &KernelParts, sweep: &Sweep) -> Option<CudaKernel> {
    let stored_always = |p: usize| k.ir.body.iter().any(|s| matches!(s, Stmt::Store { field, .. } if *field == p));
    let mut tiles: Vec<Tile> = k
        .fields()
        .iter()
        .filter(|fa| fa.is_read() || fa.written)
        .map(|fa| {
            let (lo, hi) = k.reach(fa);
            Tile {
                fa,
                lo: (-lo[0]) as u32,
                hi: hi[0] as u32,
                offset: 0,
                load: fa.is_read() || !stored_always(fa.param),
            }
        })
        .collect();
    let fits = |chunk: u32, tiles: &[Tile]| {
        tiles.iter().map(|t| t.bytes(chunk).next_multiple_of(16)).sum::<u32>() <= WARP_BYTES
    };
    let chunk = [32, 16, 8, 4].into_iter().find(|&c| fits(c, &tiles))?;
    let mut offset = 0;
    for t in &mut tiles {
        t.offset = offset;
        offset += t.bytes(chunk).next_multiple_of(16);
    }
    let warp_bytes = offset;
    let (level, levels, step) = (naming::C_LEVEL, naming::C_LEVELS, naming::C_STEP);
    let forward = sweep.order == SweepOrder::Forward;
    let mut s = k.header(32 * WARPS);
    // Threads: x = lane = column along m, y = warp (o). Every lane stays to the end: the loads
    // and stores of the warp need all 32.
    write!(
        s,
        "    const int __lane = threadIdx.x;
    const int m0 = blockIdx.y * 32;
    const int o = blockIdx.z * {WARPS} + threadIdx.y;
    if (o >= n_o) return;
    const int m = m0 + __lane;
    const bool __active = m < n_m;
    const long long {step} = 1LL;
    const int {levels} = n_c;
    extern __shared__ __align__(16) unsigned char smem[];
    unsigned char* __warp_smem = smem + threadIdx.y * {warp_bytes};
"
    )
    .expect("write");
    for t in &tiles {
        writeln!(s, "    {0}* {1} = reinterpret_cast<{0}*>(__warp_smem + {2});", c_type(t.fa.elem), t.var(), t.offset)
            .expect("write");
    }
    // The chunk's first level `__a0` (lowest level) and length, in the sweep's order.
    let first = if forward { format!("__q * {chunk}") } else { format!("max(0, {levels} - (__q + 1) * {chunk})") };
    let last = if forward {
        format!("min({levels}, (__q + 1) * {chunk}) - 1")
    } else {
        format!("{levels} - 1 - __q * {chunk}")
    };
    write!(
        s,
        "    {{
        // The column's own scope: carried locals may take any name but the reserved ones.
{}        for (int __q = 0; __q * {chunk} < {levels}; ++__q) {{
            const int __a0 = {first}, __a1 = {last};
            const int __len = __a1 - __a0 + 1;
",
        print_stmts(k.ir, &sweep.carried, &Staged { k, tiles: &tiles }, 8)
    )
    .expect("write");
    // Column j of the warp starts at origin + (m0 + j) * S_M + o * S_O.
    // The loops run over whole tiles (a constant span, so `/` and `%` are multiplications);
    // the levels past the chunk's last (the range's last chunk) are skipped.
    for t in tiles.iter().filter(|t| t.load) {
        let span = chunk + t.lo + t.hi;
        writeln!(
            s,
            "            #pragma unroll 4
            for (int __i = __lane; __i < {all}; __i += 32) {{
                const int __j = __i / {span}, __r = __i % {span};
                if (m0 + __j < n_m && __r < __len + {halo}) {}[__r * {ROW} + __j] = {}[origin + (long long)(m0 + __j) * S_M + (long long)o * S_O + __a0 - {} + __r];
            }}",
            t.var(),
            k.name(t.fa.param),
            t.lo,
            all = 32 * span,
            halo = t.lo + t.hi,
        )
        .expect("write");
    }
    let at = if forward { "__a0 + __r" } else { "__a1 - __r" };
    write!(
        s,
        "            __syncwarp();
            if (__active) {{
                for (int __r = 0; __r < __len; ++__r) {{
                    const int {level} = __q * {chunk} + __r;
                    const int __row = {at} - __a0;
                    const long long idx = origin + (long long)m * S_M + (long long)o * S_O + __row + __a0;
{}                }}
            }}
            __syncwarp();
",
        print_stmts(k.ir, &k.ir.body, &Staged { k, tiles: &tiles }, 20)
    )
    .expect("write");
    for t in tiles.iter().filter(|t| t.fa.written) {
        writeln!(
            s,
            "            #pragma unroll 4
            for (int __i = __lane; __i < {all}; __i += 32) {{
                const int __j = __i / {chunk}, __r = __i % {chunk};
                if (m0 + __j < n_m && __r < __len) {}[origin + (long long)(m0 + __j) * S_M + (long long)o * S_O + __a0 + __r] = {}[(__r + {}) * {ROW} + __j];
            }}",
            k.name(t.fa.param),
            t.var(),
            t.lo,
            all = 32 * chunk,
        )
        .expect("write");
    }
    s.push_str("            __syncwarp();\n        }\n    }\n}\n");
    Some(CudaKernel {
        source: s,
        entry: k.entry.clone(),
        block: [32, WARPS, 1],
        points_per_block: [u32::MAX, 32, WARPS],
        shared_bytes: warp_bytes * WARPS,
        line_points: 0,
    })
}
