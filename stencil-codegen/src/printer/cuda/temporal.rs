//! Temporal blocking (AN5D-style): one sweep computes several time steps of a stencil whose
//! output feeds its next step's input (a ping-pong pair `x → y`).
//!
//! A block of `tile_x × tile_y` threads, each with `lanes` consecutive points along c, owns a
//! column of the grid over (c, m) and walks a chunk of planes along o. Every time level keeps the
//! thread's own columns in registers (a queue of the planes the input's reach along o spans) and
//! its last planes in shared memory for the neighbours across the plane (one vector per
//! neighbouring row or group of lanes). Level l computes the plane `hi + 1` behind level l-1's
//! newest, from what earlier planes wrote: the levels run last to first and one barrier per plane
//! suffices; the last level goes to `y`. Each level's region shrinks by the reach on every side,
//! so the block writes a tile of `tile - steps × (reach width)` points per axis, and
//! neighbouring blocks compute the overlap again (AN5D's redundant halo computation).
//!
//! Fields other than the pair are read as they are at the call, for every step (a stencil
//! that reads `u_prev` besides `u` sees the same `u_prev` in all steps, as `run_steps` does).
//!
//! Points outside the range keep the value the buffer of their level holds, as n single steps
//! leave them: level t's is read from `y` for odd t and from `x` for even t (the single steps
//! `x → y`, `y → x`, ... write level t into those). So the sweep gives the bits of `steps` single
//! launches alternating the pair, provided `steps` is odd (the runtime splits a run into odd
//! sweeps: an even one would write its result where other blocks still read level 0).

use super::c_body::{c_type, print_body, Access};
use super::kernel::KernelParts;
use super::text::plus32;
use super::CudaKernel;
use crate::analysis::Analysis;
use crate::ir::{ParamId, ParamKind, StencilIr, Stmt};
use std::fmt;
use std::fmt::Write;

/// Shared memory one block may use on the GPUs the runtime targets (sm_90: 227 KiB).
pub const MAX_SHARED_BYTES: u32 = 227 * 1024;

/// The blocking of a temporally blocked sweep: threads per block over (c, m), time steps per
/// sweep, planes of o each block walks, and points per thread along c.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimeTiling {
    /// Threads along c (the level-0 tile is `tile_x × lanes` points wide, halo included).
    pub tile_x: u32,
    /// Threads along m.
    pub tile_y: u32,
    /// Time steps one sweep computes.
    pub steps: u32,
    /// Planes along o each block writes.
    pub planes: u32,
    /// Consecutive points along c per thread (1, 2 or 4; at most 16 bytes), which it reads
    /// from shared memory and stores there as one vector.
    pub lanes: u32,
}

impl TimeTiling {
    /// A short name for tables and kernel names (`steps3_32x32x64`, with two points per thread
    /// `steps3_32x32x64_v2`).
    pub fn label(&self) -> String {
        let lanes = if self.lanes == 1 { String::new() } else { format!("_v{}", self.lanes) };
        format!("steps{}_{}x{}x{}{lanes}", self.steps, self.tile_x, self.tile_y, self.planes)
    }

    /// This tiling with `steps` time steps per sweep.
    pub fn with_steps(self, steps: u32) -> TimeTiling {
        TimeTiling { steps, ..self }
    }
}

impl fmt::Display for TimeTiling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

impl std::str::FromStr for TimeTiling {
    type Err = String;

    /// The tiling a [`TimeTiling::label`] names (`steps3_32x32x64`, `steps3_32x32x64_v2`).
    fn from_str(label: &str) -> Result<Self, String> {
        let bad = || format!("`{label}` is not a time tiling label: use e.g. steps3_32x32x64 or steps3_32x32x64_v2");
        let rest = label.strip_prefix("steps").ok_or_else(bad)?;
        let mut parts = rest.split('_');
        let (steps, sizes) = (parts.next().ok_or_else(bad)?, parts.next().ok_or_else(bad)?);
        let lanes = match parts.next() {
            None => 1,
            Some(v) => v.strip_prefix('v').and_then(|v| v.parse().ok()).ok_or_else(bad)?,
        };
        let n: Vec<u32> = sizes.split('x').map(str::parse).collect::<Result<_, _>>().map_err(|_| bad())?;
        match (steps.parse::<u32>(), n.as_slice(), parts.next()) {
            (Ok(steps), &[tile_x, tile_y, planes], None) => Ok(TimeTiling { tile_x, tile_y, steps, planes, lanes }),
            _ => Err(bad()),
        }
    }
}

/// Why a stencil cannot run several steps per sweep, as a sentence that says what to change;
/// `Ok` with the output field (the pair's other half) when `input` and it form a ping-pong pair.
pub fn steps_output(ir: &StencilIr, analysis: &Analysis, input: ParamId) -> Result<ParamId, String> {
    if ir.dim != 3 {
        return Err(format!("it is {}D: sweeps of several steps march along the third axis of 3D stencils", ir.dim));
    }
    if ir.reduces() || ir.sweep.is_some() {
        return Err("it reduces or sweeps columns: only point updates run several steps per sweep".into());
    }
    let Some(ParamKind::Field(fin)) = ir.params.get(input).map(|p| p.kind) else {
        return Err(format!("parameter {input} is not a field"));
    };
    let name = &ir.params[input].name;
    if fin.writable || !analysis.field(input).is_read() {
        return Err(format!("the pair's input `{name}` must be a field the stencil reads and does not write"));
    }
    let written: Vec<_> = analysis.outputs().collect();
    let [out] = written.as_slice() else {
        let names: Vec<&str> = written.iter().map(|f| f.name.as_str()).collect();
        return Err(format!(
            "it writes {} fields ({}): a sweep of several steps carries one field from step to step; \
             run the steps one by one",
            names.len(),
            names.join(", ")
        ));
    };
    if out.elem != fin.elem {
        return Err(format!("`{}` and `{name}` have different element types: they cannot swap places", out.name));
    }
    if out.is_read() {
        return Err(format!(
            "it reads `{}`, the field it writes: a step must read only the previous step's field `{name}`",
            out.name
        ));
    }
    if !ir.body.iter().any(|s| matches!(s, Stmt::Store { field, .. } if *field == out.param)) {
        return Err(format!(
            "it writes `{}` only under a condition: write it at every point (`{}[idx] = if c {{ a }} else {{ b }};`), \
             so that no step keeps an older value",
            out.name, out.name
        ));
    }
    Ok(out.param)
}

/// The blocking's own limits for a stencil whose pair input reaches `lo..=hi` (layout axes),
/// keeps `planes` planes per level in shared memory ([`shared_planes`]) and has elements
/// `elem_bytes` wide: the shared memory a block uses, or `Err` with what to change.
pub(super) fn check(t: TimeTiling, lo: [i32; 3], hi: [i32; 3], planes: i32, elem_bytes: u32) -> Result<u32, String> {
    let threads = t.tile_x as u64 * t.tile_y as u64;
    if ![1, 2, 4].contains(&t.lanes) || t.lanes * elem_bytes > 16 {
        return Err(format!(
            "{} points per thread of {elem_bytes}-byte elements: use 1, 2 or 4 points and at most 16 bytes",
            t.lanes
        ));
    }
    if t.steps == 0 || t.planes == 0 || threads == 0 || threads > 1024 {
        return Err(format!(
            "needs at least one step and one plane and 1 to 1024 threads per block; it has {} steps, {} planes, {threads} threads",
            t.steps, t.planes
        ));
    }
    for (axis, tile) in [(0, t.tile_x as u64 * t.lanes as u64), (1, t.tile_y as u64)] {
        let lost = t.steps as i64 * (hi[axis] - lo[axis]) as i64;
        if lost >= tile as i64 {
            return Err(format!(
                "{} steps of a stencil {} points wide along layout axis {} leave no output in a tile of {tile}: \
                 use fewer steps or a wider tile",
                t.steps,
                hi[axis] - lo[axis] + 1,
                ["c", "m"][axis]
            ));
        }
    }
    let ring = planes as u64;
    let points = threads * t.lanes as u64;
    let bytes = t.steps as u64 * ring * points * elem_bytes as u64;
    if bytes > MAX_SHARED_BYTES as u64 {
        return Err(format!(
            "needs {bytes} bytes of shared memory per block ({} levels × {ring} planes × {points} points), more than {}: \
             use fewer steps or a smaller tile",
            t.steps, MAX_SHARED_BYTES
        ));
    }
    Ok(bytes as u32)
}

/// Planes of each level a block keeps in shared memory for a stencil whose pair input is read
/// at `offsets` (layout axes) and reaches `hi` along o: from the lowest plane the next level
/// reads off the thread's own column up to the plane the level writes meanwhile (0 where every
/// read is on the own column, which registers hold), rounded up to a power of two so that a
/// plane's slot is a mask, not a division.
pub(super) fn shared_planes(offsets: &[[i32; 3]], hi: [i32; 3]) -> i32 {
    let planes = offsets.iter().filter(|o| o[0] != 0 || o[1] != 0).map(|o| hi[2] - o[2] + 2).max().unwrap_or(0);
    if planes == 0 {
        0
    } else {
        (planes as u32).next_power_of_two() as i32
    }
}

/// The kernel's facts, shared by the printer and the level accesses.
struct Sweep<'a> {
    k: &'a KernelParts<'a>,
    t: TimeTiling,
    input: ParamId,
    output: ParamId,
    /// The input's reach (layout axes, low and high end).
    lo: [i32; 3],
    hi: [i32; 3],
    /// The input's reach along o, low end, and the planes a register queue holds.
    lo_o: i32,
    queue_len: i32,
    /// Planes of a level in shared memory (0: none).
    planes: i32,
    /// Points per thread along c, and per shared row and plane.
    lanes: i32,
    row: i32,
    plane: i32,
    /// The points a block writes along c and m.
    out: [i32; 2],
    /// The element's C type and its vector of `lanes`.
    elem: &'static str,
    vector: String,
    /// Kernel names (reserved for the pair's fields, so a point update cannot shadow them):
    /// the shared planes, the vector stored there, a level's register queues and its values.
    shared: String,
    stored: String,
    input_name: String,
    value: String,
}

/// The accesses of lane `lane` of level `level` (1..=steps): the input from level-1's registers
/// (the thread's own columns) or shared planes, other fields from global memory at `idx`, the
/// output into the level's value or (last level) to global memory.
struct Level<'a> {
    s: &'a Sweep<'a>,
    level: u32,
    lane: i32,
    /// The copy of the unrolled plane loop (see `Sweep::queue_at`).
    turn: i32,
}

/// `3`, `m2`: an offset in a C name.
fn tag(v: i32) -> String {
    if v < 0 {
        format!("m{}", -v)
    } else {
        v.to_string()
    }
}

impl Sweep<'_> {
    /// The plane slot of relative plane `to + dd` (the ring is a power of two: a mask).
    fn slot(&self, dd: i32) -> String {
        debug_assert_eq!(self.planes.count_ones(), 1, "shared_planes rounds up to a power of two");
        format!("((to{}) & {})", plus32(dd), self.planes - 1)
    }

    /// The index in the shared planes of `level`'s element at plane `to + dd`, row `tm + dm` and
    /// thread column `column` (an int expression), lane 0.
    fn shared_index(&self, level: u32, dd: i32, dm: i32, column: &str) -> String {
        format!(
            "({} + {}) * {} + (tm{}) * {} + ({column}) * {}",
            level as i32 * self.planes,
            self.slot(dd),
            self.plane,
            plus32(dm),
            self.row,
            self.lanes
        )
    }

    /// The register of `level`'s value in lane `lane` of the thread at plane offset `dd` from
    /// the plane the next level computes, in copy `turn` of the plane loop. The loop is unrolled
    /// by the queue's length and each copy names the registers one further round, so a queue
    /// shifts without moving values: the newest value goes where the oldest was.
    fn queue_at(&self, level: u32, dd: i32, lane: i32, turn: i32) -> String {
        format!("q_{}_{level}_{}_{lane}", self.input_name, (dd - self.lo_o + turn).rem_euclid(self.queue_len))
    }

    /// The vector of `level`'s shared planes at plane `to + dd`, row `tm + dm`, thread column
    /// `tc + group` (loaded once per level for all lanes).
    fn vector_at(&self, level: u32, dd: i32, dm: i32, group: i32) -> String {
        format!("q_{}_s{level}_{}_{}_{}", self.input_name, tag(dd), tag(dm), tag(group))
    }

    /// The (plane, row, thread column) vectors lanes of level `level + 1` read from `level`'s
    /// shared planes: reads outside the thread's own columns.
    fn vectors(&self, offsets: &[[i32; 3]]) -> Vec<(i32, i32, i32)> {
        let mut v: Vec<(i32, i32, i32)> = offsets
            .iter()
            .flat_map(|&[dc, dm, dd]| (0..self.lanes).map(move |l| (dd, dm, (l + dc).div_euclid(self.lanes))))
            .filter(|&(_, dm, g)| dm != 0 || g != 0)
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

impl Access for Level<'_> {
    fn load(&self, field: usize, offset: [i32; 3]) -> String {
        if field != self.s.input {
            return self.s.k.global_load(field, "idx", offset);
        }
        let s = self.s;
        let [dc, dm, dd] = s.k.geo.layout_offset_of(offset);
        let p = self.lane + dc;
        let (group, lane) = (p.div_euclid(s.lanes), p.rem_euclid(s.lanes));
        if dm == 0 && group == 0 {
            s.queue_at(self.level - 1, dd, lane, self.turn)
        } else if s.lanes == 1 {
            format!("{}[{}]", s.shared, s.shared_index(self.level - 1, dd, dm, &format!("tc{}", plus32(dc))))
        } else {
            format!("{}.{}", s.vector_at(self.level - 1, dd, dm, group), ["x", "y", "z", "w"][lane as usize])
        }
    }
    fn store(&self, field: usize, value: &str) -> String {
        debug_assert_eq!(field, self.s.output, "a steppable stencil writes only its output");
        if self.level == self.s.t.steps {
            format!("{}[idx] = {value};", self.s.k.name(field))
        } else {
            format!("{}{}_{} = {value};", self.s.value, self.level, self.lane)
        }
    }
}

pub(super) fn print(k: &KernelParts, t: TimeTiling, input: ParamId, output: ParamId, shared_bytes: u32) -> CudaKernel {
    let fa = k.field(input);
    let (lo, hi) = k.reach(fa);
    let offsets: Vec<[i32; 3]> = fa.offsets.iter().map(|&o| k.geo.layout_offset_of(o)).collect();
    let TimeTiling { tile_x: bx, tile_y: by, steps: n, planes, lanes } = t;
    let (v, n_i) = (lanes as i32, n as i32);
    let x_name = k.ir.params[input].name.clone();
    let width = bx as i32 * v;
    let s = Sweep {
        k,
        t,
        input,
        output,
        lo,
        hi,
        lo_o: lo[2],
        queue_len: hi[2] - lo[2] + 1,
        planes: shared_planes(&offsets, hi),
        lanes: v,
        row: width,
        plane: (bx * by) as i32 * v,
        out: [width - n_i * (hi[0] - lo[0]), by as i32 - n_i * (hi[1] - lo[1])],
        elem: c_type(fa.elem),
        vector: super::text::vector_type(fa.elem, lanes),
        shared: format!("s_{x_name}"),
        stored: format!("v_{x_name}"),
        value: format!("r_{}_", k.ir.params[output].name),
        input_name: x_name,
    };
    let mut src = k.header(bx * by);
    src.push_str(&s.declarations());
    src.push_str(&s.prologue());
    let vectors = s.vectors(&offsets);
    for turn in 0..s.queue_len {
        src.push_str(&s.plane_copy(turn, &vectors));
    }
    src.push_str("    }\n}\n");
    CudaKernel {
        source: src,
        entry: k.entry.clone(),
        block: [bx, by, 1],
        points_per_block: [s.out[0] as u32, s.out[1] as u32, planes],
        shared_bytes,
        line_points: 0,
    }
}

impl Sweep<'_> {
    /// The shared planes and every level's register queues: the thread's own columns, planes
    /// lo..=hi around the plane the next level computes.
    fn declarations(&self) -> String {
        let (s, elem, n) = (self, self.elem, self.t.steps);
        let mut src = String::new();
        if s.planes > 0 {
            writeln!(
                src,
                "    extern __shared__ __align__(16) unsigned char stencil_smem[];
    {elem}* {} = ({elem}*)stencil_smem; // [level][plane % {}][m][c], levels 0..{n}",
                s.shared, s.planes
            )
            .expect("write");
        }
        for level in 0..n {
            for lane in 0..s.lanes {
                let regs: Vec<String> =
                    (0..s.queue_len).map(|j| format!("{} = 0", s.queue_at(level, s.lo[2] + j, lane, 0))).collect();
                writeln!(src, "    {elem} {};", regs.join(", ")).expect("write");
            }
        }
        src
    }

    /// A level's values into its queues and shared planes.
    fn shift(&self, level: u32, turn: i32) -> String {
        let s = self;
        let mut out = String::new();
        for lane in 0..s.lanes {
            write!(out, "{} = {}{level}_{lane}; ", s.queue_at(level, s.hi[2], lane, turn + 1), s.value).expect("write");
        }
        if s.planes > 0 {
            let at = s.shared_index(level, 0, 0, "tc");
            if s.lanes == 1 {
                write!(out, "{}[{at}] = {}{level}_0;", s.shared, s.value).expect("write");
            } else {
                let parts: String = (0..s.lanes)
                    .map(|l| format!(" {}.{} = {}{level}_{l};", s.stored, ["x", "y", "z", "w"][l as usize], s.value))
                    .collect();
                write!(
                    out,
                    "{{ {} {};{parts} *({}*)&{}[{at}] = {}; }}",
                    s.vector, s.stored, s.vector, s.shared, s.stored
                )
                .expect("write");
            }
        }
        out
    }

    /// Per lane: inside the range and within its reach along c; per level and lane: inside the
    /// level's share of the tile.
    fn flags(&self) -> String {
        let (lo, hi, v, width) = (self.lo, self.hi, self.lanes, self.row);
        let mut flags = String::new();
        for lane in 0..v {
            writeln!(
                flags,
                "    const bool in_c{lane} = c{pl} >= 0 && c{pl} < n_c, near_c{lane} = c{pl} >= {lc} && c{pl} < n_c{hc};",
                pl = plus32(lane),
                lc = lo[0],
                hc = plus32(hi[0]),
            )
            .expect("write");
            for level in 1..=self.t.steps as i32 {
                writeln!(
                    flags,
                    "    const bool on{level}_{lane} = tc * {v}{pl} >= {} && tc * {v}{pl} < {} && tm >= {} && tm < {};",
                    -level * lo[0],
                    width - level * hi[0],
                    -level * lo[1],
                    self.t.tile_y as i32 - level * hi[1],
                    pl = plus32(lane),
                )
                .expect("write");
            }
        }
        flags
    }

    /// Lane `lane`'s load of the input at plane `plane` into `into`, where it lies within the
    /// reach of the range.
    fn load_at(&self, plane: &str, into: &str, lane: i32) -> String {
        format!(
            "if (near_c{lane} && near_m && {plane} >= {} && {plane} < n_o{}) {into} = __ldg(&{}[col{} + (long long)({plane}) * S_O]);",
            self.lo[2],
            plus32(self.hi[2]),
            self.k.name(self.input),
            plus32(lane)
        )
    }

    /// Level l computes plane p - l * (hi + 1): one plane behind what level l - 1 had before this
    /// plane, so every level reads what the previous plane's work wrote, the levels run from the
    /// last to the first (each reads its predecessor's register queue before that shifts), and
    /// one barrier per plane suffices. The input's first plane is loaded here, the next one a
    /// plane ahead in the loop, which is unrolled by the queues' length (see `Sweep::queue_at`).
    /// This prints the thread's position, its flags and the loop's head.
    fn prologue(&self) -> String {
        let (lo, hi, v, n_i) = (self.lo, self.hi, self.lanes, self.t.steps as i32);
        let [out_x, out_y] = self.out;
        let planes = self.t.planes;
        let skew = hi[2] + 1;
        let firsts: String = (0..v)
            .map(|l| {
                let value = format!("{}0_{l}", self.value);
                format!("    {} {value} = 0;\n    {}\n", self.elem, self.load_at("base", &value, l))
            })
            .collect();
        format!(
            "    const int tc = threadIdx.x, tm = threadIdx.y;
    const int c = blockIdx.x * {out_x} + tc * {v}{c_shift}, m = blockIdx.y * {out_y} + tm{m_shift};
    const int z0 = blockIdx.z * {planes}, z1 = min(z0 + {planes}, n_o);
    const int base = z0{o_shift};
    const bool in_m = m >= 0 && m < n_m, near_m = m >= {lm} && m < n_m{hm};
{flags}    const long long col = origin + c + m * S_M;
{firsts}    const int end = z1{p_end};
    for (int p = base; p < end;) {{
",
            c_shift = plus32(n_i * lo[0]),
            m_shift = plus32(n_i * lo[1]),
            o_shift = plus32(n_i * lo[2]),
            p_end = plus32(n_i * skew),
            lm = lo[1],
            hm = plus32(hi[1]),
            flags = self.flags(),
        )
    }

    /// Copy `turn` of the unrolled plane loop: the next input plane's load, every level from
    /// the last to the first, and level 0 (the input's plane p).
    fn plane_copy(&self, turn: i32, vectors: &[(i32, i32, i32)]) -> String {
        let nexts: String = (0..self.lanes)
            .map(|l| {
                format!(
                    "        {} next{l} = 0;\n        {}\n",
                    self.elem,
                    self.load_at("p + 1", &format!("next{l}"), l)
                )
            })
            .collect();
        let mut src = format!("      {{ // plane p, copy {turn} of the loop\n{nexts}\n");
        for level in (1..=self.t.steps).rev() {
            src.push_str(&self.level_code(level, turn, vectors));
        }
        let advance: String = (0..self.lanes).map(|l| format!(" {}0_{l} = next{l};", self.value)).collect();
        let next_plane = if turn + 1 < self.queue_len { "        if (++p >= end) break;\n" } else { "        ++p;\n" };
        write!(
            src,
            "        {{ // level 0: the input's plane p
            const int to = p - base;
            {}
        }}
       {advance}
{}      }}
{next_plane}",
            self.shift(0, turn),
            if self.planes > 0 { "        __syncthreads();\n" } else { "" }
        )
        .expect("write");
        src
    }

    /// Level `level` (1..=steps) in copy `turn` of the plane loop: its plane q, the shared
    /// vectors its lanes read, each lane's point update (or, outside the range but within the
    /// reach, the value its buffer holds), and the shift into its queues.
    fn level_code(&self, level: u32, turn: i32, vectors: &[(i32, i32, i32)]) -> String {
        let (s, lo, hi, v, width) = (self, self.lo, self.hi, self.lanes, self.row);
        let (n, n_i, l) = (self.t.steps, self.t.steps as i32, level as i32);
        let skew = hi[2] + 1;
        let (x, y) = (s.k.name(s.input), s.k.name(s.output));
        let any_lane = format!(
            "tc * {v} + {} >= {} && tc * {v} < {} && tm >= {} && tm < {}",
            v - 1,
            -l * lo[0],
            width - l * hi[0],
            -l * lo[1],
            s.t.tile_y as i32 - l * hi[1]
        );
        // The shared vectors the lanes read, once for all lanes (a neighbouring thread column is
        // clamped into the tile: only lanes outside the level's share read it).
        let mut loads = String::new();
        if v > 1 {
            for &(dd, dm, g) in vectors {
                let column = match g.cmp(&0) {
                    std::cmp::Ordering::Equal => "tc".to_string(),
                    std::cmp::Ordering::Less => format!("max(tc{}, 0)", plus32(g)),
                    std::cmp::Ordering::Greater => format!("min(tc{}, {})", plus32(g), s.t.tile_x - 1),
                };
                writeln!(
                    loads,
                    "                const {vt} {name} = *(const {vt}*)&{sh}[{at}];",
                    vt = s.vector,
                    name = s.vector_at(level - 1, dd, dm, g),
                    sh = s.shared,
                    at = s.shared_index(level - 1, dd, dm, &column)
                )
                .expect("write");
            }
        }
        let mut lanes_code = String::new();
        for lane in 0..v {
            let body = print_body(s.k.ir, &Level { s, level, lane, turn }, 24);
            let boundary = if level < n {
                let from = if level % 2 == 1 { format!("{y}[idx]") } else { format!("__ldg(&{x}[idx])") };
                format!(
                    " else if (on{level}_{lane} && near_c{lane} && near_m && q >= {} && q < n_o{}) {{
                        {}{level}_{lane} = {from};
                    }}",
                    lo[2],
                    plus32(hi[2]),
                    s.value
                )
            } else {
                String::new()
            };
            write!(
                lanes_code,
                "                {{
                    const long long idx = col{} + (long long)q * S_O;
                    if (on{level}_{lane} && in_c{lane} && in_m && q >= 0 && q < n_o) {{
{body}                    }}{boundary}
                }}
",
                plus32(lane)
            )
            .expect("write");
        }
        let (decl, after) = if level < n {
            let values: Vec<String> = (0..v).map(|l| format!("{}{level}_{l} = 0", s.value)).collect();
            (
                format!("            {} {};\n", s.elem, values.join(", ")),
                format!("            {}\n", s.shift(level, turn)),
            )
        } else {
            (String::new(), String::new())
        };
        format!(
            "        {{ // level {level}
            const int q = p{q_shift}, to = q - base;
{decl}            if ({any_lane} && q >= z0{zq_lo} && q < z1{zq_hi}) {{
{loads}{lanes_code}            }}
{after}        }}
",
            q_shift = plus32(-l * skew),
            zq_lo = plus32((n_i - l) * lo[2]),
            zq_hi = plus32((n_i - l) * hi[2]),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{check, TimeTiling};

    #[test]
    fn tilings_are_checked_against_the_reach_and_shared_memory() {
        let t = |label: &str| label.parse::<TimeTiling>().unwrap();
        let (lo, hi) = ([-1, -1, -1], [1, 1, 1]);
        // 3 levels of 3 planes of 32 × 32 floats.
        assert_eq!(check(t("steps3_32x32x64"), lo, hi, 3, 4), Ok(3 * 3 * 1024 * 4));
        // The tile shrinks by hi - lo per step.
        assert_eq!(check(t("steps2_8x8x4"), [-2, 0, -2], [1, 3, 0], 3, 8), Ok(2 * 3 * 64 * 8));
        assert!(check(t("steps3_8x8x4"), [-2, 0, 0], [1, 0, 0], 1, 4)
            .unwrap_err()
            .contains("no output in a tile of 8"));
        assert!(check(t("steps3_8x8x4"), [0, -2, 0], [0, 1, 0], 1, 4).unwrap_err().contains("along layout axis m"));
        let e = check(t("steps19_64x16x8"), [0, 0, -3], [0, 0, 3], 7, 8).unwrap_err();
        assert!(e.contains("bytes of shared memory per block (19 levels × 7 planes × 1024 points)"), "{e}");
        for bad in ["steps0_32x32x8", "steps3_32x32x0", "steps3_64x32x8", "steps3_0x32x8"] {
            assert!(check(t(bad), lo, hi, 2, 4).unwrap_err().contains("1 to 1024 threads"), "{bad}");
        }
    }

    #[test]
    fn shared_planes_cover_the_reads_off_the_own_column() {
        use super::shared_planes;
        // The 7-point star: in-plane neighbours at the centre plane only, one plane behind the
        // newest its level has, which is one behind the plane written meanwhile: three planes,
        // kept as four.
        let star = [[0, 0, -1], [-1, 0, 0], [0, -1, 0], [0, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1]];
        assert_eq!(shared_planes(&star, [1, 1, 1]), 4);
        // A box reads off the column one plane behind: four planes.
        assert_eq!(shared_planes(&[[1, 1, -1], [0, 0, 1]], [1, 1, 1]), 4);
        assert_eq!(shared_planes(&[[1, 0, -4], [0, 0, 4]], [1, 0, 4]), 16);
        // Reads along o only: registers hold everything.
        assert_eq!(shared_planes(&[[0, 0, -2], [0, 0, 2]], [0, 0, 2]), 0);
    }
}
