//! Temporal blocking (AN5D-style): one sweep computes several time steps of a stencil whose
//! output feeds its next step's input (a ping-pong pair `x → y`).
//!
//! A block owns a `tile_x × tile_y` column of threads over (c, m) and walks a chunk of planes
//! along o. Every time level 0..steps-1 keeps its last planes (the input's reach along o plus
//! one) in a ring in shared memory. For each plane read at level 0, level t computes its plane
//! `reach_o.hi` behind level t-1's, from level t-1's ring; the last level goes to `y`. Each
//! level's region shrinks by the reach on every side, so the block writes a tile of
//! `tile - steps × (reach width)` points per axis, and neighbouring blocks compute the overlap
//! again (AN5D's redundant halo computation).
//!
//! Points outside the range keep the value the buffer of their level holds, as n single steps
//! leave them: level t's is read from `y` for odd t and from `x` for even t (the single steps
//! `x → y`, `y → x`, ... write level t into those). So the sweep gives the bits of `steps` single
//! launches alternating the pair, provided `steps` is odd (the runtime splits a run into odd
//! sweeps: an even one would write its result where other blocks still read level 0).

use super::c_body::{c_type, print_body, Access};
use super::kernel::{plus, KernelParts};
use super::CudaKernel;
use crate::analysis::Analysis;
use crate::ir::{ParamId, ParamKind, StencilIr, Stmt};
use std::fmt;
use std::fmt::Write;

/// Shared memory one block may use on the GPUs the runtime targets (sm_90: 227 KiB).
pub const MAX_SHARED_BYTES: u32 = 227 * 1024;

/// The blocking of a temporally blocked sweep: threads per block over (c, m), time steps per
/// sweep, and planes of o each block walks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimeTiling {
    /// Threads along c (the level-0 tile's width, halo included).
    pub tile_x: u32,
    /// Threads along m.
    pub tile_y: u32,
    /// Time steps one sweep computes.
    pub steps: u32,
    /// Planes along o each block writes.
    pub planes: u32,
}

impl TimeTiling {
    /// A short name for tables and kernel names (`steps3_32x32x64`).
    pub fn label(&self) -> String {
        format!("steps{}_{}x{}x{}", self.steps, self.tile_x, self.tile_y, self.planes)
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

    /// The tiling a [`TimeTiling::label`] names (`steps3_32x32x64`).
    fn from_str(label: &str) -> Result<Self, String> {
        let bad = || format!("`{label}` is not a time tiling label: use e.g. steps3_32x32x64");
        let rest = label.strip_prefix("steps").ok_or_else(bad)?;
        let (steps, sizes) = rest.split_once('_').ok_or_else(bad)?;
        let n: Vec<u32> = sizes.split('x').map(str::parse).collect::<Result<_, _>>().map_err(|_| bad())?;
        match (steps.parse::<u32>(), n.as_slice()) {
            (Ok(steps), &[tile_x, tile_y, planes]) => Ok(TimeTiling { tile_x, tile_y, steps, planes }),
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
    let threads = t.tile_x * t.tile_y;
    if t.steps == 0 || t.planes == 0 || threads == 0 || threads > 1024 {
        return Err(format!(
            "needs at least one step and one plane and 1 to 1024 threads per block; it has {} steps, {} planes, {threads} threads",
            t.steps, t.planes
        ));
    }
    for (axis, tile) in [(0, t.tile_x), (1, t.tile_y)] {
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
    let bytes = t.steps as u64 * ring * threads as u64 * elem_bytes as u64;
    if bytes > MAX_SHARED_BYTES as u64 {
        return Err(format!(
            "needs {bytes} bytes of shared memory per block ({} levels × {ring} planes × {threads} points), more than {}: \
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
    /// The input's reach along o, low end.
    lo_o: i32,
    /// Planes of a level in shared memory (0: none).
    planes: i32,
    /// Kernel names: the shared planes, a level's register queue prefix, a level's value.
    shared: String,
    queue: String,
    value: String,
}

/// The accesses of level `level` (1..=steps): the input from level-1's registers (own column)
/// or shared planes, other fields from global memory at `idx`, the output into the level's
/// value or (last level) to global memory.
struct Level<'a> {
    s: &'a Sweep<'a>,
    level: u32,
}

impl Sweep<'_> {
    /// The shared element of `level` at plane `to + dd` (relative to the block's first plane),
    /// shifted by (dc, dm) from the thread's column.
    fn shared_at(&self, level: u32, dd: i32, dc: i32, dm: i32) -> String {
        let TimeTiling { tile_x: bx, tile_y: by, .. } = self.t;
        let p = self.planes;
        let slot = if p.count_ones() == 1 {
            format!("((to{}) & {})", plus32(dd), p - 1)
        } else {
            format!("((to{}) % {p})", plus32(dd))
        };
        format!(
            "{}[({} + {slot}) * {} + (tm{}) * {bx} + tc{}]",
            self.shared,
            level as i32 * p,
            bx * by,
            plus32(dm),
            plus32(dc)
        )
    }

    /// The register of `level`'s own-column value at plane offset `dd` from the plane the next
    /// level computes.
    fn queue_at(&self, level: u32, dd: i32) -> String {
        format!("{}{level}_{}", self.queue, dd - self.lo_o)
    }
}

impl Access for Level<'_> {
    fn load(&self, field: usize, offset: [i32; 3]) -> String {
        if field == self.s.input {
            match self.s.k.geo.layout_offset_of(offset) {
                [0, 0, dd] => self.s.queue_at(self.level - 1, dd),
                [dc, dm, dd] => self.s.shared_at(self.level - 1, dd, dc, dm),
            }
        } else {
            self.s.k.global_load(field, "idx", offset)
        }
    }
    fn store(&self, field: usize, value: &str) -> String {
        debug_assert_eq!(field, self.s.output, "a steppable stencil writes only its output");
        if self.level == self.s.t.steps {
            format!("{}[idx] = {value};", self.s.k.name(field))
        } else {
            format!("{}{} = {value};", self.s.value, self.level)
        }
    }
}

/// ` + 3`, ` - 2` or ``, for int expressions.
fn plus32(v: i32) -> String {
    plus(v as i64).trim_end_matches("LL").to_string()
}

pub(super) fn print(k: &KernelParts, t: TimeTiling, input: ParamId, output: ParamId, shared_bytes: u32) -> CudaKernel {
    let fa = k.field(input);
    let (lo, hi) = k.reach(fa);
    let offsets: Vec<[i32; 3]> = fa.offsets.iter().map(|&o| k.geo.layout_offset_of(o)).collect();
    let (x_name, y_name) = (&k.ir.params[input].name, &k.ir.params[output].name);
    // Names the point update cannot shadow (reserved for the fields' kernel variables).
    let s = Sweep {
        k,
        t,
        input,
        output,
        lo_o: lo[2],
        planes: shared_planes(&offsets, hi),
        shared: format!("s_{x_name}"),
        queue: format!("q_{x_name}_"),
        value: format!("r_{y_name}_"),
    };
    let TimeTiling { tile_x: bx, tile_y: by, steps: n, planes } = t;
    let n_i = n as i32;
    let (out_x, out_y) = (bx as i32 - n_i * (hi[0] - lo[0]), by as i32 - n_i * (hi[1] - lo[1]));
    let elem = c_type(fa.elem);
    let (x, y) = (k.name(input), k.name(output));
    let queue_len = hi[2] - lo[2] + 1;
    let mut src = k.header(bx * by);
    if s.planes > 0 {
        writeln!(
            src,
            "    extern __shared__ __align__(16) unsigned char stencil_smem[];
    {elem}* {} = ({elem}*)stencil_smem; // [level][plane % {}][m][c], levels 0..{n}",
            s.shared, s.planes
        )
        .expect("write");
    }
    // Each level's register queue: the thread's own column, planes lo..=hi around the plane the
    // next level computes.
    for level in 0..n {
        let regs: Vec<String> = (0..queue_len).map(|j| format!("{} = 0", s.queue_at(level, lo[2] + j))).collect();
        writeln!(src, "    {elem} {};", regs.join(", ")).expect("write");
    }
    let shift = |level: u32| -> String {
        let mut out = String::new();
        for j in 0..queue_len - 1 {
            let (to, from) = (s.queue_at(level, lo[2] + j), s.queue_at(level, lo[2] + j + 1));
            write!(out, "{to} = {from}; ").expect("write");
        }
        write!(out, "{} = {}{level};", s.queue_at(level, hi[2]), s.value).expect("write");
        if s.planes > 0 {
            write!(out, " {} = {}{level};", s.shared_at(level, 0, 0, 0), s.value).expect("write");
        }
        out
    };
    // Level l computes plane p - l * (hi + 1): one plane behind what level l - 1 had before this
    // iteration, so every level reads what the previous iteration wrote, the levels run from the
    // last to the first (each reads its predecessor's register queue before that shifts), and
    // one barrier per plane suffices. The input's next plane is loaded a plane ahead.
    let skew = hi[2] + 1;
    let load_at = |plane: &str| {
        format!("if (near_cm && {plane} >= {} && {plane} < n_o{}) ", lo[2], plus32(hi[2]))
            + &format!("{}0 = __ldg(&{x}[col + (long long)({plane}) * S_O]);", s.value)
    };
    write!(
        src,
        "    const int tc = threadIdx.x, tm = threadIdx.y;
    const int c = blockIdx.x * {out_x} + tc{c_shift}, m = blockIdx.y * {out_y} + tm{m_shift};
    const int z0 = blockIdx.z * {planes}, z1 = min(z0 + {planes}, n_o);
    const int base = z0{o_shift};
    const bool in_cm = c >= 0 && c < n_c && m >= 0 && m < n_m;
    const bool near_cm = c >= {lc} && c < n_c{hc} && m >= {lm} && m < n_m{hm};
    const long long col = origin + c + m * S_M;
    {elem} {v}0 = 0;
    {load_first}
    for (int p = base; p < z1{p_end}; ++p) {{
        {elem} next = 0;
        if (near_cm && p + 1 >= {lo_o} && p + 1 < n_o{ho}) next = __ldg(&{x}[col + (long long)(p + 1) * S_O]);
",
        c_shift = plus32(n_i * lo[0]),
        m_shift = plus32(n_i * lo[1]),
        o_shift = plus32(n_i * lo[2]),
        p_end = plus32(n_i * skew),
        lc = lo[0],
        lm = lo[1],
        lo_o = lo[2],
        hc = plus32(hi[0]),
        hm = plus32(hi[1]),
        ho = plus32(hi[2]),
        v = s.value,
        load_first = load_at("base"),
    )
    .expect("write");
    for level in (1..=n).rev() {
        let l = level as i32;
        // Level `level` computes the columns whose level-1 neighbours the block holds, and the
        // planes of its share of the chunk's reach.
        let body = print_body(k.ir, &Level { s: &s, level }, 20);
        let (decl, boundary, after) = if level < n {
            let from = if level % 2 == 1 { format!("{y}[idx]") } else { format!("__ldg(&{x}[idx])") };
            (
                format!("            {elem} {}{level} = 0;\n", s.value),
                format!(
                    " else if (near_cm && q >= {} && q < n_o{}) {{
                    {}{level} = {from};
                }}",
                    lo[2],
                    plus32(hi[2]),
                    s.value
                ),
                format!("            {}\n", shift(level)),
            )
        } else {
            (String::new(), String::new(), String::new())
        };
        write!(
            src,
            "        {{ // level {level}
            const int q = p{q_shift}, to = q - base;
{decl}            if (tc >= {tx_lo} && tc < {tx_hi} && tm >= {ty_lo} && tm < {ty_hi} && q >= z0{zq_lo} && q < z1{zq_hi}) {{
                const long long idx = col + (long long)q * S_O;
                if (in_cm && q >= 0 && q < n_o) {{
{body}                }}{boundary}
            }}
{after}        }}
",
            q_shift = plus32(-l * skew),
            tx_lo = -l * lo[0],
            tx_hi = bx as i32 - l * hi[0],
            ty_lo = -l * lo[1],
            ty_hi = by as i32 - l * hi[1],
            zq_lo = plus32((n_i - l) * lo[2]),
            zq_hi = plus32((n_i - l) * hi[2]),
        )
        .expect("write");
    }
    write!(
        src,
        "        {{ // level 0: the input's plane p
            const int to = p - base;
            {}
        }}
        {}0 = next;
{}",
        shift(0),
        s.value,
        if s.planes > 0 { "        __syncthreads();\n" } else { "" }
    )
    .expect("write");
    src.push_str("    }\n}\n");
    CudaKernel {
        source: src,
        entry: k.entry.clone(),
        block: [bx, by, 1],
        points_per_block: [out_x as u32, out_y as u32, planes],
        shared_bytes,
        line_points: 0,
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
