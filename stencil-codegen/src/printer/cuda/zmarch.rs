//! z-marching (ASUCA's (64, 2, n/16) launch, generalised): a 2D block over (c, m), each thread
//! walks `points_per_thread` points along o. Every input value a thread needs sits in a register
//! queue along o, so each value is loaded from memory once per thread. With `lanes` > 1 a thread
//! also covers `lanes` consecutive points along c, loading whole 16-byte vectors (aligned groups
//! of lanes) and storing its outputs as one vector: the access
//! width that decides the throughput of a memory-bound kernel (measured: one 4-byte value per
//! thread moves about 64% of the copy bandwidth, one 16-byte vector practically all of it).
//!
//! Where the register budget allows (and the block has at least 256 threads), the queues look one
//! plane ahead: each step loads the values of the next step (the o column's next plane and the
//! next plane's in-plane neighbours), so a thread has a step's loads in flight while it computes
//! (measured on an H200, 7-point 512³ f32: 86.8% of copy against 79.1% without at 64×4×16).

use super::c_body::{c_type, print_body, Access};
use super::kernel::layout_offset;
use super::kernel::KernelParts;
use super::plane_tile::PlaneTile;
use super::queue::{queues, Queue};
use super::text::{plus, vector_type};
use super::CudaKernel;
use crate::analysis::FieldAccess;
use crate::ir::Stmt;

const COMPONENTS: [&str; 4] = [".x", ".y", ".z", ".w"];

/// Most queued values per thread before the lanes are halved: 64 values keep a 25-point kernel
/// near 64 registers (50% occupancy) instead of 94 (31%, measured with ncu on an H200). The
/// lookahead slots are added only within the same budget.
const QUEUE_VALUES: i32 = 64;

/// Blocks of fewer threads get no lookahead. Measured on an H200 (512³ f32, 7-point): with one
/// plane of lookahead, blocks of 256 threads or more went from 77–82% to 82–88% of copy
/// bandwidth, blocks of 128 threads (128×1, 64×2, 32×4) fell from 76–83% to 55–67% with more
/// DRAM bytes read; the cause of the fall is not established.
const LOOKAHEAD_MIN_THREADS: u32 = 256;

/// Gives every queue one plane of lookahead when all of them fit the register budget with it
/// (counted in 4-byte registers: an f64 value takes two) and the block is large enough; the
/// queues then load the o columns first. Otherwise the queues are left as they are (a 25-point
/// kernel, whose columns alone would fit, measured 76% of copy with lookahead on its columns
/// against 78.5% without).
fn look_ahead(k: &KernelParts, mut queues: Vec<Queue>, lanes: i32, threads: u32) -> Vec<Queue> {
    let words = |q: &Queue| (k.field(q.field).elem.size_bytes() as i32 / 4).max(1);
    let registers = queues.iter().map(|q| (q.depth() + 1) * lanes * words(q)).sum::<i32>();
    if threads >= LOOKAHEAD_MIN_THREADS && registers <= QUEUE_VALUES {
        for q in &mut queues {
            q.ahead = 1;
        }
        queues.sort_by_key(|q| !q.is_column());
    }
    queues
}

/// With a plane tile: one plane of lookahead on the o columns only (the in-plane values come from
/// the tile), within the same register budget.
fn look_ahead_columns(k: &KernelParts, mut queues: Vec<Queue>, lanes: i32) -> Vec<Queue> {
    let words = |q: &Queue| (k.field(q.field).elem.size_bytes() as i32 / 4).max(1);
    let registers = queues.iter().map(|q| (q.depth() + i32::from(q.is_column())) * lanes * words(q)).sum::<i32>();
    if registers <= QUEUE_VALUES {
        for q in queues.iter_mut().filter(|q| q.is_column()) {
            q.ahead = 1;
        }
    }
    queues.sort_by_key(|q| !q.is_column());
    queues
}

struct Marching<'a> {
    k: &'a KernelParts<'a>,
    queues: &'a [Queue],
    lane: i32,
    lanes: i32,
    flagged: bool,
}

impl Access for Marching<'_> {
    fn load(&self, field: usize, offset: [i32; 3]) -> String {
        let fa = self.k.field(field);
        if fa.writable {
            // Read at its own point only: loaded into `cur_*` before the bodies (see `print`).
            return format!("cur_{}_{}", fa.name, self.lane);
        }
        let [dc, dm, d] = self.k.geo.layout_offset_of(offset);
        let p = self.lane + dc;
        let group = p.div_euclid(self.lanes);
        let q = self.queues.iter().find(|q| q.field == field && q.group == group && q.dm == dm).expect("queued");
        let component = if self.lanes == 1 { "" } else { COMPONENTS[p.rem_euclid(self.lanes) as usize] };
        format!("{}{component}", q.slot(d))
    }
    fn store(&self, field: usize, value: &str) -> String {
        let r = format!("r_{}_{}", self.k.field(field).name, self.lane);
        if self.flagged {
            format!("{r} = {value}; w_{r} = true;")
        } else {
            format!("{r} = {value};")
        }
    }
}

/// How a z-marching kernel finds its range and its threads' columns.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Columns {
    /// One range (the `origin`, `n_c`, `n_m`, `n_o` parameters), a `block_x` × `block_y` block
    /// over (c, m); with `tiled`, the 2.5D variant whose in-plane neighbours come from a shared
    /// plane tile (`plane_tile`).
    Range { tiled: bool },
    /// Several boxes, blocks of `block_x` threads shaped per box (`boxes.rs`).
    Boxes,
}

/// Prints the z-marching kernel over `columns`.
pub(super) fn print(
    k: &KernelParts,
    block_x: u32,
    block_y: u32,
    points_per_thread: u32,
    columns: Columns,
) -> CudaKernel {
    let tiled = columns == Columns::Range { tiled: true };
    // Wide stencils need many queue slots; each lane multiplies them. Halve the lanes (still
    // aligned: the runtime checked alignment for the widest) until the queues hold at most
    // QUEUE_VALUES values, so a thread keeps enough occupancy to have loads in flight.
    let mut lanes = k.geo.lanes.max(1) as i32;
    let queue_of = |lanes: i32| queues(k, |dc| (0..lanes).map(|l| (l + dc).div_euclid(lanes)).collect(), |_, _| true);
    let mut queues = queue_of(lanes);
    while lanes > 1 && queues.iter().map(|q| q.depth() * lanes).sum::<i32>() > QUEUE_VALUES {
        lanes /= 2;
        queues = queue_of(lanes);
    }
    let tile = tiled.then(|| PlaneTile::new(k, &mut queues, lanes, [block_x, block_y]));
    let queues = match tile {
        Some(_) => look_ahead_columns(k, queues, lanes),
        None => look_ahead(k, queues, lanes, block_x * block_y),
    };
    // With a tile, every thread takes part in the barriers: the loads of a thread that computes no
    // point are guarded (the vector a tile holds, or nothing).
    let guard = |q: &Queue| match &tile {
        None => None,
        Some(t) if t.feeds(q) => Some("loader"),
        Some(_) => Some("active"),
    };
    let outputs: Vec<_> = k.facts.outputs().collect();
    // Vector stores need every lane's value: only when each output is stored on every path.
    let flagged =
        outputs.iter().any(|f| !k.ir.body.iter().any(|s| matches!(s, Stmt::Store { field, .. } if *field == f.param)));
    let load = |q: &Queue, d: i32| {
        let off = layout_offset(k, d);
        let lin = q.group as i64 * lanes as i64 + q.dm as i64 * k.geo.layout_stride(1) + k.geo.linear(off);
        let vt = vector_type(k.field(q.field).elem, lanes as u32);
        if lanes == 1 {
            format!("__ldg(&{}[idx{}])", k.name(q.field), plus(lin))
        } else {
            format!("__ldg(reinterpret_cast<const {vt}*>(&{}[idx{}]))", k.name(q.field), plus(lin))
        }
    };
    // Threads start at the 128-byte line at or before the range's first point (without a tile
    // those before it return at once; with one they load the tile's left halo), so that every
    // warp's accesses cover whole lines: with the range 64 bytes into a line, an in-place
    // 25-point update ran at 63% of copy against 86% aligned (H100, 1000³ f32).
    let line_points = k.line_points(block_x * lanes as u32);
    let mut s = match columns {
        Columns::Range { .. } => {
            let mut s = k.header(block_x * block_y);
            s.push_str(&format!(
                "    {}
    const int m = blockIdx.y * {block_y} + threadIdx.y;
    const int o0 = blockIdx.z * {points_per_thread};
",
                k.aligned_c(&format!("blockIdx.x * {block_x} + threadIdx.x"), lanes as u32, line_points),
            ));
            s
        }
        Columns::Boxes => super::boxes::header(k, block_x, points_per_thread, lanes),
    };
    s.push_str(&format!(
        "    {}long long idx = origin + c + m * S_M + o0 * S_O;
",
        if tile.is_some() { "" } else { "if (c < 0 || c >= n_c || m >= n_m) return;\n    " }
    ));
    if let Some(t) = &tile {
        s.push_str(&t.declarations(k));
    }
    for q in &queues {
        let vt = vector_type(k.field(q.field).elem, lanes as u32);
        let slots: Vec<String> = (q.min..=q.top()).map(|d| q.slot(d)).collect();
        s.push_str(&format!("    {vt} {};\n", slots.join(", ")));
        if q.tiled {
            continue;
        }
        let g = guard(q).map(|g| format!("if ({g}) ")).unwrap_or_default();
        // Slots min..max; the one lookahead slot (top = max + 1) is loaded in the loop.
        for d in q.min..q.max {
            s.push_str(&format!("    {g}{} = {};\n", q.slot(d), load(q, d)));
        }
        if q.ahead > 0 {
            s.push_str(&format!("    {g}{} = {};\n", q.slot(q.max), load(q, q.max)));
        }
    }
    s.push_str(&format!(
        "    const int steps = min({points_per_thread}, n_o - o0);
    for (int s = 0; s < steps; ++s, idx += S_O) {{
"
    ));
    for q in queues.iter().filter(|q| !q.tiled) {
        let conditions: Vec<String> = guard(q)
            .map(String::from)
            .into_iter()
            .chain((q.ahead > 0).then(|| format!("s + {} < steps", q.ahead)))
            .collect();
        let g = if conditions.is_empty() { String::new() } else { format!("if ({}) ", conditions.join(" && ")) };
        s.push_str(&format!("        {g}{} = {};\n", q.slot(q.top()), load(q, q.top())));
    }
    if let Some(t) = &tile {
        s.push_str(&t.step(k, &queues));
        s.push_str("        if (active) {\n");
    }
    s.push_str(&in_place_loads(k, lanes));
    s.push_str(&output_registers(&outputs, lanes, flagged));
    for lane in 0..lanes {
        s.push_str("        {\n");
        s.push_str(&print_body(k.ir, &Marching { k, queues: &queues, lane, lanes, flagged }, 12));
        s.push_str("        }\n");
    }
    s.push_str(&output_stores(k, &outputs, lanes, flagged));
    if tile.is_some() {
        s.push_str("        }\n");
    }
    for q in &queues {
        s.push_str(&q.shift("        "));
    }
    s.push_str("    }\n}\n");
    CudaKernel {
        source: s,
        entry: k.entry.clone(),
        block: [block_x, block_y, 1],
        points_per_block: [block_x * lanes as u32, block_y, points_per_thread],
        shared_bytes: tile.map_or(0, |t| t.bytes),
        line_points,
    }
}

/// The loads of fields updated in place (read at their own point, then written): one vector per
/// thread like the queued inputs, not lane by lane, since scalar loads halve the bytes in flight;
/// plain loads, not `__ldg`, since the kernel writes the field.
fn in_place_loads(k: &KernelParts, lanes: i32) -> String {
    let mut s = String::new();
    for f in k.fields().iter().filter(|f| f.writable && f.is_read()) {
        let (t, name) = (c_type(f.elem), k.name(f.param));
        let cur: Vec<String> = (0..lanes).map(|l| format!("cur_{}_{l}", f.name)).collect();
        let scalar = |l: usize| format!("c + {l} < n_c ? {name}[idx + {l}] : ({t})0");
        if lanes == 1 {
            s.push_str(&format!(
                "        const {t} {} = {name}[idx];
",
                cur[0]
            ));
        } else {
            let vt = vector_type(f.elem, lanes as u32);
            let full: Vec<String> = (0..lanes as usize).map(|l| format!("v_{}{}", f.name, COMPONENTS[l])).collect();
            let part: Vec<String> = (0..lanes as usize).map(scalar).collect();
            s.push_str(&format!(
                "        const {vt} v_{} = c + {lanes} <= n_c ? *reinterpret_cast<const {vt}*>(&{name}[idx]) : make_{vt}({});
",
                f.name,
                part.join(", ")
            ));
            for (r, v) in cur.iter().zip(&full) {
                s.push_str(&format!(
                    "        const {t} {r} = {v};
"
                ));
            }
        }
    }
    s
}

/// Each output's value registers per lane (and, where a path may not store it, their flags).
fn output_registers(outputs: &[&FieldAccess], lanes: i32, flagged: bool) -> String {
    let mut s = String::new();
    for f in outputs {
        let t = c_type(f.elem);
        let regs: Vec<String> = (0..lanes).map(|l| format!("r_{}_{l}", f.name)).collect();
        s.push_str(&format!(
            "        {t} {};\n",
            regs.iter().map(|r| format!("{r} = 0")).collect::<Vec<_>>().join(", ")
        ));
        if flagged {
            s.push_str(&format!(
                "        bool {};\n",
                regs.iter().map(|r| format!("w_{r} = false")).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    s
}

/// Each output's stores: one vector where the row holds every lane and each lane has a value,
/// else lane by lane.
fn output_stores(k: &KernelParts, outputs: &[&FieldAccess], lanes: i32, flagged: bool) -> String {
    let mut s = String::new();
    for f in outputs {
        let name = k.name(f.param);
        let scalar_stores: String = (0..lanes)
            .map(|l| {
                let r = format!("r_{}_{l}", f.name);
                let guard = if flagged { format!("c + {l} < n_c && w_{r}") } else { format!("c + {l} < n_c") };
                format!("            if ({guard}) {name}[idx + {l}] = {r};\n")
            })
            .collect();
        if lanes == 1 || flagged {
            s.push_str(&format!("        {{\n{scalar_stores}        }}\n"));
        } else {
            let vt = vector_type(f.elem, lanes as u32);
            let regs: Vec<String> = (0..lanes).map(|l| format!("r_{}_{l}", f.name)).collect();
            s.push_str(&format!(
                "        if (c + {lanes} <= n_c) {{
            *reinterpret_cast<{vt}*>(&{name}[idx]) = make_{vt}({});
        }} else {{
{scalar_stores}        }}
",
                regs.join(", ")
            ));
        }
    }
    s
}
