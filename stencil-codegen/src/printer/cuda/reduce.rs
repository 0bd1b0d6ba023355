//! The kernels of a stencil that reduces: one pass over the range at memory bandwidth, then a
//! one-block pass over the block results. No atomics, so the result is the same bits on every
//! run of the same launch.
//!
//! Pass 1 (`<name>_reduce`, [`REDUCE_THREADS`] threads): the range's rows (runs along the
//! contiguous axis) are cut into chunks of `bx · points_per_thread` points; a block's threads
//! form `REDUCE_THREADS / bx` rows of `bx` threads (`bx` a power of two from 32 to the block
//! size, a launch argument: the smallest whose chunk covers a row), and the grid strides over
//! row groups (`blockIdx.y`) and chunks (`blockIdx.x`). A thread takes `lanes` consecutive
//! points (16-byte vector loads where the range is aligned: `Geometry::lanes`) at `tx`,
//! `tx + bx`, ... (coalesced), first loads every value these points read into registers, all
//! loads in flight together, then runs the point updates on them in order (points in increasing
//! `c`), folding into a register per reduction; the point update is the same
//! C every strategy prints, so a stencil may also write fields. Then a shuffle tree per
//! warp, the warps in order through shared memory, and the block's result into
//! `partials[block]` (a reduction parameter is a pointer to its partials in the kernel).
//!
//! Pass 2 (`<name>_reduce_final`, one block): each thread folds the partials `t, t + 256, ...` in
//! order, the same warp and block combination, and thread 0 writes each reduction's result as a
//! `double` to `result[r]`.

use super::c_body::{c_type, combine_fn, literal, param_name, print_body, Access};
use super::kernel::HELPERS;
use super::text::{plus, vector_type};
use super::{CudaKernel, Geometry};
use crate::analysis::{Analysis, FieldAccess};
use crate::ir::{Literal, ParamKind, ReduceOp, ReduceParam, StencilIr};
use crate::naming;
use std::fmt::Write;

/// Threads per block of both passes.
pub const REDUCE_THREADS: u32 = 256;
/// The most loads per staged value each thread issues per chunk; fewer when the stencil reads
/// many values per point, so the staged values stay within `STAGED_BYTES`.
pub const REDUCE_UNROLL: u32 = 8;
/// The most bytes a thread stages per chunk (what it has in flight): 32 `f32` values.
pub const STAGED_BYTES: u32 = 128;

/// The two kernels of a reducing stencil, in one source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReduceKernel {
    /// The source (both entries) and pass 1: its entry, [`REDUCE_THREADS`] threads per block.
    /// Its parameters are the stencil's (a reduction: a pointer to its partial results, one per
    /// block), then `origin, n_c, n_m, n_o` as every strategy's, then `bx`.
    pub kernel: CudaKernel,
    /// Pass 2's entry: parameters the partials of each reduction, a `double*` of one result per
    /// reduction, and the number of partials; one block of [`REDUCE_THREADS`].
    pub final_entry: String,
    /// Points of a row each thread takes per chunk (a chunk is `bx · points_per_thread` points):
    /// `lanes` consecutive points per load, times the loads per staged value.
    pub points_per_thread: u32,
}

fn identity(r: ReduceParam) -> String {
    let v = match r.op {
        ReduceOp::Sum => 0.0,
        ReduceOp::Min => f64::INFINITY,
        ReduceOp::Max => f64::NEG_INFINITY,
    };
    literal(Literal::Float(v, v as f32), r.elem)
}

/// Min and max take `b` when it is smaller (larger) or NaN, so NaN sticks, as on the host.
const COMBINE: &str = r#"template <typename T> __device__ __forceinline__ T stencil_sum(T a, T b) { return a + b; }
template <typename T> __device__ __forceinline__ T stencil_min(T a, T b) { return (b < a || isnan(b)) ? b : a; }
template <typename T> __device__ __forceinline__ T stencil_max(T a, T b) { return (b > a || isnan(b)) ? b : a; }
"#;

/// Reads of read-only fields from the staged registers
/// (`__ld_<field>_<offset index>[__u * lanes + __l]`), of written fields from memory.
struct Staged<'a> {
    ir: &'a StencilIr,
    facts: &'a Analysis,
    geo: &'a Geometry,
    lanes: u32,
}

fn staged_name(fa: &FieldAccess, i: usize) -> String {
    format!("__ld_{}_{i}", fa.name)
}

impl Access for Staged<'_> {
    fn load(&self, field: usize, offset: [i32; 3]) -> String {
        let fa = self.facts.field(field);
        if fa.writable {
            return format!("{}[idx{}]", param_name(self.ir, field), plus(self.geo.linear(offset)));
        }
        let i = fa.offsets.iter().position(|o| *o == offset).expect("offset analysed");
        format!("{}[__u * {} + __l]", staged_name(fa, i), self.lanes)
    }
    fn store(&self, field: usize, value: &str) -> String {
        format!("{}[idx] = {value};", param_name(self.ir, field))
    }
}

/// Prints the two kernels of a stencil with reductions over fields laid out as `geo` says (its
/// point functions inlined first, if it still has any).
pub fn print_reduce_kernel(ir: &StencilIr, geo: &Geometry) -> ReduceKernel {
    let prepared = crate::pipeline::prepare(ir, crate::pipeline::Target::Cuda);
    let (ir, facts) = (&*prepared.ir, prepared.analysis);
    let reductions: Vec<(usize, ReduceParam)> = ir.reductions().collect();
    let t = REDUCE_THREADS;
    let entry = format!("{}_reduce", ir.name);
    let final_entry = format!("{}_reduce_final", ir.name);
    let mut s = format!(
        "// Stencil `{}` (reduction), generated by stencil-codegen. Layout axes: c = contiguous, m, o.\n",
        ir.name
    );
    s.push_str(HELPERS);
    s.push_str(COMBINE);
    let params = reduce_params(ir);
    let staged: Vec<(&FieldAccess, usize)> =
        facts.inputs().flat_map(|fa| (0..fa.offsets.len()).map(move |i| (fa, i))).collect();
    // `lanes` consecutive points per load where the range is aligned (16-byte vectors), `u` such
    // loads per staged value and chunk, as many as fit in STAGED_BYTES per thread.
    let lanes = geo.lanes.max(1);
    let bytes: u32 = staged.iter().map(|(fa, _)| fa.elem.size_bytes() as u32).sum::<u32>() * lanes;
    let u = (1..=REDUCE_UNROLL).rev().find(|u| u.is_power_of_two() && bytes * u <= STAGED_BYTES).unwrap_or(1);
    let per = u * lanes;
    let body = |pad| print_body(ir, &Staged { ir, facts: &facts, geo, lanes }, pad);
    let decls: String =
        staged.iter().map(|&(fa, i)| format!("    {} {}[{per}];\n", c_type(fa.elem), staged_name(fa, i))).collect();
    let stride = |l: usize| if geo.layout[l] < 3 { geo.strides[geo.layout[l]] } else { 0 };
    let inits: String = reductions
        .iter()
        .map(|&(p, r)| format!("    {} {} = {};\n", c_type(r.elem), naming::acc(&ir.params[p].name), identity(r)))
        .collect();
    let first = format!("const long long idx = base + c0 + __u * bx * {lanes};");
    let point = format!("const long long idx = base + c0 + __u * bx * {lanes} + __l;");
    let guard = format!("if (c0 + __u * bx * {lanes} + __l < n_c)");
    write!(
        s,
        "
extern \"C\" __global__ void __launch_bounds__({t}) {entry}(
    {params})
{{
    const long long S_M = {sm}LL, S_O = {so}LL;
{held}{inits}{decls}    const int tx = threadIdx.x & (bx - 1), ty = threadIdx.x / bx, ry = {t} / bx, span = bx * {per};
    const int chunks = (n_c + span - 1) / span;
    const unsigned int rows = (unsigned int)n_m * (unsigned int)n_o;
    const unsigned int groups = (rows + ry - 1) / ry;
    for (unsigned int g = blockIdx.y; g < groups; g += gridDim.y) {{
        const unsigned int row = g * ry + ty;
        if (row < rows) {{
            const long long base = origin + (long long)(row % (unsigned int)n_m) * S_M + (long long)(row / (unsigned int)n_m) * S_O;
            for (int ch = blockIdx.x; ch < chunks; ch += gridDim.x) {{
                const int c0 = ch * span + tx * {lanes};
                if (c0 + {last} * bx * {lanes} + {lanes} <= n_c) {{
                    // A whole chunk: every load first, then the points in order.
#pragma unroll
                    for (int __u = 0; __u < {u}; ++__u) {{
                        {first}
{loads_full}                    }}
#pragma unroll
                    for (int __u = 0; __u < {u}; ++__u) {{
#pragma unroll
                        for (int __l = 0; __l < {lanes}; ++__l) {{
                            {point}
{body_full}                        }}
                    }}
                }} else {{
#pragma unroll
                    for (int __u = 0; __u < {u}; ++__u) {{
#pragma unroll
                        for (int __l = 0; __l < {lanes}; ++__l) {{
                            {guard} {{
                                {point}
{loads_part}                            }}
                        }}
                    }}
#pragma unroll
                    for (int __u = 0; __u < {u}; ++__u) {{
#pragma unroll
                        for (int __l = 0; __l < {lanes}; ++__l) {{
                            {guard} {{
                                {point}
{body_part}                            }}
                        }}
                    }}
                }}
            }}
        }}
    }}
{combine}}}
",
        params = params.join(",\n    "),
        sm = stride(1),
        so = stride(2),
        held = super::c_body::held_loads(ir),
        last = u - 1,
        loads_full = vector_loads(ir, geo, &staged, lanes, 24),
        body_full = body(28),
        loads_part = lane_loads(ir, geo, &staged, lanes, 32),
        body_part = body(32),
        combine = block_combine(ir, &reductions, |p, r| {
            format!("{}[blockIdx.x + blockIdx.y * gridDim.x] = {r};", param_name(ir, p))
        }),
    )
    .expect("write");
    s.push_str(&final_kernel(ir, &reductions, &final_entry, &inits));
    let kernel = CudaKernel {
        source: s,
        entry,
        block: [t, 1, 1],
        points_per_block: [t * per, 1, 1],
        shared_bytes: 0,
        line_points: 0,
    };
    ReduceKernel { kernel, final_entry, points_per_thread: per }
}

/// The first kernel's parameters: the stencil's (a reduction as its per-block results), then the
/// range and the block's width along c.
fn reduce_params(ir: &StencilIr) -> Vec<String> {
    ir.params
        .iter()
        .enumerate()
        .map(|(p, param)| {
            let name = param_name(ir, p);
            match param.kind {
                ParamKind::Scalar(crate::ir::ScalarType::Bool) => format!("const int {name}"),
                ParamKind::Scalar(ty) => format!("const {} {name}", c_type(ty)),
                ParamKind::Held(ty) => super::c_body::held_param(ir, p, ty),
                ParamKind::Field(f) if f.writable => format!("{}* __restrict__ {name}", c_type(f.elem)),
                ParamKind::Field(f) => format!("const {}* __restrict__ {name}", c_type(f.elem)),
                ParamKind::Reduction(r) => format!("{}* __restrict__ {name}", c_type(r.elem)),
            }
        })
        .chain(
            ["const long long origin", "const int n_c", "const int n_m", "const int n_o", "const int bx"]
                .map(String::from),
        )
        .collect()
}

/// A whole chunk's loads of every staged value (`staged`: field and offset index): vector loads
/// of every offset that keeps the alignment (its contiguous-axis offset a multiple of `lanes`),
/// the others lane by lane.
fn vector_loads(ir: &StencilIr, geo: &Geometry, staged: &[(&FieldAccess, usize)], lanes: u32, pad: usize) -> String {
    let pad = " ".repeat(pad);
    let mut out = String::new();
    for &(fa, i) in staged {
        let (name, at) = (staged_name(fa, i), plus(geo.linear(fa.offsets[i])));
        let field = param_name(ir, fa.param);
        let aligned = geo.layout_offset_of(fa.offsets[i])[0].rem_euclid(lanes as i32) == 0;
        if lanes > 1 && aligned {
            let v = vector_type(fa.elem, lanes);
            let parts: String = ["x", "y", "z", "w"][..lanes as usize]
                .iter()
                .enumerate()
                .map(|(l, c)| format!(" {name}[__u * {lanes} + {l}] = v.{c};"))
                .collect();
            writeln!(out, "{pad}{{ const {v} v = __ldg((const {v}*)&{field}[idx{at}]);{parts} }}").expect("write");
        } else {
            for l in 0..lanes {
                let at = plus(geo.linear(fa.offsets[i]) + l as i64);
                writeln!(out, "{pad}{name}[__u * {lanes} + {l}] = __ldg(&{field}[idx{at}]);").expect("write");
            }
        }
    }
    out
}

/// A partial chunk's loads of every staged value, one lane at a time.
fn lane_loads(ir: &StencilIr, geo: &Geometry, staged: &[(&FieldAccess, usize)], lanes: u32, pad: usize) -> String {
    let pad = " ".repeat(pad);
    staged
        .iter()
        .map(|&(fa, i)| {
            let at = plus(geo.linear(fa.offsets[i]));
            let field = param_name(ir, fa.param);
            format!("{pad}{}[__u * {lanes} + __l] = __ldg(&{field}[idx{at}]);\n", staged_name(fa, i))
        })
        .collect()
}

/// The second kernel: one block folds the first kernel's per-block results in order and stores
/// each reduction's total as a double in `result`.
fn final_kernel(ir: &StencilIr, reductions: &[(usize, ReduceParam)], final_entry: &str, inits: &str) -> String {
    let t = REDUCE_THREADS;
    let mut s = String::new();
    let final_params: Vec<String> = reductions
        .iter()
        .map(|&(p, r)| format!("const {}* __restrict__ {}", c_type(r.elem), param_name(ir, p)))
        .chain(["double* __restrict__ result".to_string(), "const int n".to_string()])
        .collect();
    let folds: String = reductions
        .iter()
        .map(|&(p, r)| {
            let acc = naming::acc(&ir.params[p].name);
            format!("        {acc} = {}({acc}, {}[i]);\n", combine_fn(r.op), param_name(ir, p))
        })
        .collect();
    write!(
        s,
        "
extern \"C\" __global__ void __launch_bounds__({t}) {final_entry}(
    {params})
{{
{inits}    for (int i = threadIdx.x; i < n; i += {t}) {{
{folds}    }}
{combine}}}
",
        params = final_params.join(",\n    "),
        combine = block_combine(ir, reductions, |i, r| {
            let slot = reductions.iter().position(|&(p, _)| p == i).expect("a reduction");
            format!("result[{slot}] = (double){r};")
        }),
    )
    .expect("write");
    s
}

/// Every thread's accumulators combined: a shuffle tree per warp, then thread 0 folds the warps
/// in order and `write(param, value)` stores the block's result.
fn block_combine(ir: &StencilIr, reductions: &[(usize, ReduceParam)], write: impl Fn(usize, &str) -> String) -> String {
    let warps = REDUCE_THREADS / 32;
    let mut s = String::new();
    for &(p, r) in reductions {
        let (acc, op, ty) = (naming::acc(&ir.params[p].name), combine_fn(r.op), c_type(r.elem));
        let shared = format!("__warp_{}", ir.params[p].name);
        write!(
            s,
            "    for (int s = 16; s > 0; s >>= 1) {acc} = {op}({acc}, __shfl_down_sync(0xffffffffu, {acc}, s));
    __shared__ {ty} {shared}[{warps}];
    if ((threadIdx.x & 31) == 0) {shared}[threadIdx.x >> 5] = {acc};
"
        )
        .expect("write");
    }
    s.push_str("    __syncthreads();\n    if (threadIdx.x == 0) {\n");
    for &(p, r) in reductions {
        let (op, ty) = (combine_fn(r.op), c_type(r.elem));
        let shared = format!("__warp_{}", ir.params[p].name);
        let total = format!("__block_{}", ir.params[p].name);
        write!(
            s,
            "        {ty} {total} = {shared}[0];
        for (int w = 1; w < {warps}; ++w) {total} = {op}({total}, {shared}[w]);
        {}
",
            write(p, &total)
        )
        .expect("write");
    }
    s.push_str("    }\n");
    s
}
