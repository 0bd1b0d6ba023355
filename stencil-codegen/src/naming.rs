//! Every name the printers invent, and the rule that keeps user names clear of them.
//!
//! The generated Rust (`run_host`) and CUDA C share a namespace with the user's parameters and
//! locals. Generated Rust names all start with `__`, kernel parameters with `p_`; the names a
//! kernel's point update can see (the linear index, tile coordinates, register queues, ...) and
//! C's keywords and math functions are listed here too. The lowering renames any user local that
//! [`is_reserved`] (see [`local_name`]); user *parameters* keep their names in Rust (the
//! generated names never clash with a name not starting with `__`) and are prefixed in C.

/// The attribute `#[stencil(sweep = ..)]` leaves on the function for the lowering
/// (`#[__stencil_sweep(forward)]`); the functor does not keep it.
pub const SWEEP_ATTR: &str = "__stencil_sweep";
/// The attribute `#[stencil(adjoint(..))]` leaves on the function for the expansion
/// (`#[__stencil_adjoint(u, v)]`); the functor does not keep it.
pub const ADJOINT_ATTR: &str = "__stencil_adjoint";
/// The attribute `#[stencil(adjoint_step(..))]` leaves on the function for the expansion
/// (`#[__stencil_adjoint_step(u, u_prev)]`); the functor does not keep it.
pub const ADJOINT_STEP_ATTR: &str = "__stencil_adjoint_step";
/// The attribute `#[stencil(gradient(..))]` leaves on the function for the expansion
/// (`#[__stencil_gradient(c)]`); the functor does not keep it.
pub const GRADIENT_ATTR: &str = "__stencil_gradient";
/// The attribute `#[stencil(scaled_adjoint_step(..))]` leaves on the function for the expansion
/// (`#[__stencil_scaled_adjoint_step(u, u_prev)]`); the functor does not keep it.
pub const SCALED_ADJOINT_STEP_ATTR: &str = "__stencil_scaled_adjoint_step";
/// The attribute `#[stencil(scaled_gradient(..))]` leaves on the function for the expansion
/// (`#[__stencil_scaled_gradient(c)]`); the functor does not keep it.
pub const SCALED_GRADIENT_ATTR: &str = "__stencil_scaled_gradient";
/// The attribute `#[stencil(fma)]` leaves on the function for the expansion
/// (`#[__stencil_fma]`); the functor does not keep it.
pub const FMA_ATTR: &str = "__stencil_fma";

/// The attribute `#[stencil(portable_math)]` leaves on the function for the expansion
/// (`#[__stencil_portable_math]`); the functor does not keep it.
pub const PORTABLE_MATH_ATTR: &str = "__stencil_portable_math";

// ---- The Rust loop nest (`run_host`) ----

/// The launch range argument of `run_host` (prefixed: a user parameter may be called `range`).
pub const RANGE: &str = "__range";
/// The argument tuple of `run_host`.
pub const ARGS: &str = "__args";
/// The validated shape of the launch's fields.
pub const SHAPE: &str = "__shape";
/// The shape's strides.
pub const STRIDES: &str = "__strides";
/// First linear index of the current row.
pub const BASE: &str = "__base";
/// Points in the current row.
pub const LEN: &str = "__len";
/// Position in the current row.
pub const X: &str = "__x";
/// The row function of the nest (the loop over one row).
pub const ROW_FN: &str = "__row_fn";
/// The block function of the nest (the loop over the rows of a block).
pub const BLOCK_FN: &str = "__block_fn";
/// The block function compiled with AVX2.
pub const BLOCK_FN_AVX2: &str = "__block_fn_avx2";
/// The block function compiled with AVX-512.
pub const BLOCK_FN_AVX512: &str = "__block_fn_avx512";
/// The block function's const parameter: the contiguous axis is axis 0 with stride 1, so reads of
/// a field that differ only along it are one row pointer and constant displacements.
pub const UNIT: &str = "__UNIT";
/// Whether the launch's fields have stride 1 along axis 0 (the value `UNIT` takes).
pub const UNIT_STRIDE: &str = "__unit_stride";
/// The block of rows a call of the block function runs.
pub const BLOCK: &str = "__block";
/// The written rows of the block.
pub const OUT: &str = "__out";
/// The row of the block.
pub const ROW_INDEX: &str = "__r";
/// The instruction set level of the launch.
pub const ISA: &str = "__isa";
/// The executor type parameter of the functor's `Stencil` impl.
pub const EXEC: &str = "__E";

/// The slice (or row writer) of field `field`.
pub fn data(field: &str) -> String {
    format!("__data_{field}")
}

/// The linear offset of the `i`-th distinct offset read from `field`.
pub fn offset(field: &str, i: usize) -> String {
    format!("__off_{field}_{i}")
}

/// The row slice of the `i`-th distinct offset read from `field` (0 for a written field).
pub fn row(field: &str, i: usize) -> String {
    format!("__row_{field}_{i}")
}

/// The rows of a block that the `i`-th distinct offset read from `field` reaches.
pub fn block_rows(field: &str, i: usize) -> String {
    format!("__rows_{field}_{i}")
}

/// The per-row accumulator of reduction `name` in the nest (and in a kernel, its per-thread one).
pub fn acc(name: &str) -> String {
    format!("__acc_{name}")
}

/// The `i`-th row of written field `field` at a level a column sweep has passed.
pub fn passed_row(field: &str, i: usize) -> String {
    format!("__passed_{field}_{i}")
}

/// A carried local's values in the row of a column sweep (one per column of the row).
pub fn carry_row(local: &str) -> String {
    format!("__carry_{local}")
}

/// A carried local's values in a tile of a column sweep (one per column of the tile).
pub fn carry_tile(local: &str) -> String {
    format!("__carried_{local}")
}

/// Point function `func`'s output `output` at its `call`-th offset, in the row function.
pub fn point_row(func: usize, output: usize, call: usize) -> String {
    format!("__pf{func}_{output}_{call}")
}

/// The row function of point function `func` (its values along a row).
pub fn point_row_fn(func: usize) -> String {
    format!("__pf{func}_row_fn")
}

/// The layout of point function `func`'s values in a block (`PointLayout`).
pub fn point_layout(func: usize) -> String {
    format!("__pf{func}_layout")
}

/// The buffer of point function `func`'s output `output` in a block.
pub fn point_buffer(func: usize, output: usize) -> String {
    format!("__pf{func}_buf_{output}")
}

/// The length of each of point function `func`'s buffers in a block.
pub fn point_buffer_len(func: usize) -> String {
    format!("__pf{func}_len")
}

/// The per-thread buffer of element type `ty` that a block's point function values live in.
pub fn point_scratch(ty: &str) -> String {
    format!("__pf_scratch_{ty}")
}

/// The linear offset of the `i`-th distinct offset point function `func` reads from `field`.
pub fn point_offset(func: usize, field: &str, i: usize) -> String {
    format!("__pf{func}_off_{field}_{i}")
}

/// Output `output`'s row in a point function's row function.
pub fn point_out(output: usize) -> String {
    format!("__pf_out_{output}")
}

/// The thread's previous block with point functions, where its values can be reused.
pub const POINT_PREVIOUS: &str = "__pf_previous";
/// A group of a point function's values in a block, its rows, a row of it.
pub const POINT_GROUP: &str = "__pf_group";
/// See [`POINT_GROUP`].
pub const POINT_GROUP_ROWS: &str = "__pf_rows";
/// See [`POINT_GROUP`].
pub const POINT_GROUP_ROW: &str = "__pf_q";
/// Where a row of a group's values starts in its buffer.
pub const POINT_AT: &str = "__pf_at";
/// The part of a per-thread buffer not yet cut into a point function's outputs.
pub const POINT_REST: &str = "__pf_rest";

/// The level's place in a column sweep (`idx.level()`).
pub const LEVEL: &str = "__level";
/// The number of levels a column sweep walks (`idx.levels()`).
pub const LEVELS: &str = "__levels";
/// A column sweep's per-tile state (the carried locals' values).
pub const SWEEP_STATE: &str = "__state";

/// The partial results of reduction `name` (one per row of the range) in the nest.
pub fn partials(name: &str) -> String {
    format!("__partials_{name}")
}

/// The map from a row of the range to its slot among the partial results.
pub const SLOTS: &str = "__slots";

/// The exported `macro_rules!` twin of `#[stencil_fn]` helper `helper` whose tokens are
/// `tokens`: named after both (FNV-1a of the tokens) and numbered in the order the compiler
/// expands helpers, so helpers of one name in different modules of a crate (even with the same
/// body) do not clash at its root.
pub fn helper_macro(helper: &str, tokens: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static EXPANDED: AtomicU64 = AtomicU64::new(0);
    let hash = tokens.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
    format!("__stencil_fn_{helper}_{hash:016x}_{}", EXPANDED.fetch_add(1, Ordering::Relaxed))
}

// ---- CUDA C ----

/// Prefix of every kernel parameter (user names never clash with C keywords or the kernel's
/// own variables).
pub const PARAM_PREFIX: &str = "p_";

/// The C name of the kernel parameter for user parameter `name`.
pub fn param(name: &str) -> String {
    format!("{PARAM_PREFIX}{name}")
}

/// Variables of the kernels that the printed point update refers to (or that would hide a
/// function it calls): the linear index and the shared-memory tile coordinates.
const KERNEL_NAMES: &[&str] = &["idx", "tc", "tm", "to", C_LEVEL, C_LEVELS, C_BASE, C_STEP];

/// A column sweep kernel's level (`idx.level()`).
pub const C_LEVEL: &str = "sweep_level";
/// A column sweep kernel's level count (`idx.levels()`).
pub const C_LEVELS: &str = "sweep_levels";
/// A column sweep kernel's first point of the column.
pub const C_BASE: &str = "sweep_base";
/// A column sweep kernel's distance between levels.
pub const C_STEP: &str = "sweep_step";

/// Prefixes of every generated Rust name and every kernel parameter.
const PREFIXES: &[&str] = &["__", PARAM_PREFIX];

/// Kernel variables named after a field `f` that the printed point update refers to: register
/// queue slots (`q_f_..`), shared tiles (`s_f`), output registers and their written flags
/// (`r_f_..`, `w_r_f_..`), an in-place field's current values (`cur_f_..`) and vector (`v_f`).
pub fn is_field_variable(name: &str, field: &str) -> bool {
    let after = |prefix: &str| name.strip_prefix(prefix).and_then(|rest| rest.strip_prefix(field));
    ["q_", "r_", "w_r_", "cur_"].iter().any(|p| after(p).is_some_and(|rest| rest.starts_with('_')))
        || ["s_", "v_"].iter().any(|p| after(p) == Some(""))
}

/// C/C++/CUDA words and the device functions printed expressions call.
const C_WORDS: &[&str] = &[
    "auto",
    "char",
    "double",
    "float",
    "int",
    "long",
    "short",
    "signed",
    "unsigned",
    "void",
    "volatile",
    "register",
    "switch",
    "case",
    "default",
    "goto",
    "sizeof",
    "typedef",
    "union",
    "extern",
    "static",
    "inline",
    "restrict",
    "bool",
    "new",
    "delete",
    "this",
    "template",
    "typename",
    "class",
    "namespace",
    "private",
    "public",
    "protected",
    "friend",
    "operator",
    "virtual",
    "explicit",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "min",
    "max",
];

/// The C math functions printed expressions call (double precision; the single-precision ones
/// add `f`), which a C local of the same name would hide.
const C_MATH: &[&str] = &[
    "sqrt",
    "cbrt",
    "abs",
    "fabs",
    "fmin",
    "fmax",
    "pow",
    "exp",
    "exp2",
    "log",
    "log2",
    "log10",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "tanh",
    "floor",
    "ceil",
    "round",
    "trunc",
    "copysign",
    "fma",
    "hypot",
    "fmod",
    "isnan",
    "stencil_powi",
];

/// Whether a local called `name`, in a stencil with field parameters `fields`, could clash with
/// a generated name (Rust or C), a C word or a C math function.
pub fn is_reserved(name: &str, fields: &[&str]) -> bool {
    let math = |n: &str| C_MATH.contains(&n);
    PREFIXES.iter().any(|p| name.starts_with(p))
        || KERNEL_NAMES.contains(&name)
        || fields.iter().any(|f| is_field_variable(name, f))
        || C_WORDS.contains(&name)
        || math(name)
        || name.strip_suffix('f').is_some_and(math)
}

/// A fresh local name from `base` for a stencil with field parameters `fields`: [`local_name`]
/// of it, or with the first suffix `_1`, `_2`, ... that is not `taken` (and, suffixed, not
/// `avoid`; where every suffix is, the `v_` form of it: `r_out_1`, `r_out_2`, ... are all
/// registers of field `out`).
pub fn fresh_local(base: &str, fields: &[&str], taken: impl Fn(&str) -> bool, avoid: impl Fn(&str) -> bool) -> String {
    let name = local_name(base, fields);
    if !taken(&name) {
        return name;
    }
    (1..100_000)
        .filter(|n| !taken(&format!("{name}_{n}")))
        .find_map(|n| {
            let plain = format!("{name}_{n}");
            let v = format!("v_{}_{n}", name.trim_start_matches('_'));
            [plain, v].into_iter().find(|c| !taken(c) && !avoid(c))
        })
        .expect("a free local name among 100000 suffixes")
}

/// The name a user local `base` gets in generated code before de-duplication: `base` itself, or
/// `v_` + `base` without leading underscores if it [`is_reserved`].
pub fn local_name(base: &str, fields: &[&str]) -> String {
    if is_reserved(base, fields) {
        format!("v_{}", base.trim_start_matches('_'))
    } else {
        base.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_are_reserved() {
        let fields = ["u", "out"];
        for name in ["__x", "p_u", "idx", "tc", "q_u_0_n1", "s_u", "r_out_0", "w_r_out_0", "cur_out_1", "exp", "sqrtf"]
        {
            assert!(is_reserved(name, &fields), "{name}");
        }
        for name in ["x", "q", "q_0", "s_v", "su", "lap", "c", "m", "o", "expo", "range", "args"] {
            assert!(!is_reserved(name, &fields), "{name}");
        }
        assert_eq!(local_name("__tmp", &fields), "v_tmp");
        assert_eq!(local_name("idx", &fields), "v_idx");
        assert_eq!(local_name("lap", &fields), "lap");
    }
}

#[cfg(test)]
mod fresh_tests {
    use super::*;

    #[test]
    fn a_fresh_local_is_free_and_clear_of_generated_names() {
        let reserved = |n: &str| is_reserved(n, &["out"]);
        assert_eq!(fresh_local("a", &["out"], |_| false, reserved), "a");
        assert_eq!(fresh_local("a", &["out"], |n| n == "a", reserved), "a_1");
        // Every `r_out_N` is a register of field `out`.
        let name = fresh_local("r_out", &["out"], |n| n == "r_out", reserved);
        assert!(!is_reserved(&name, &["out"]) && name != "r_out", "{name}");
    }
}
