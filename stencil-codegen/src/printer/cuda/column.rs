//! A column sweep on the GPU: one thread per column. The threads of a block cover a tile of the
//! two layout axes across the columns (along the contiguous one first, so a warp's accesses at a
//! level are consecutive when the column axis is not the contiguous one); each thread declares
//! the carried locals in registers and walks its column's levels in the sweep's order. A written
//! field read at a passed level is a plain global load of what the same thread stored earlier.
//! The requested strategy does not apply: every sweep runs this kernel, except where the column
//! axis is the contiguous one (`column_staged.rs`, which stages a warp's columns through shared
//! memory).

use super::c_body::print_stmts;
use super::kernel::KernelParts;
use super::point_per_thread::Global;
use super::CudaKernel;
use crate::ir::{Sweep, SweepOrder};
use crate::naming;

/// Threads per block along the two axes across the columns of a 3D sweep (their product along
/// the one axis of a 2D sweep).
pub const COLUMN_BLOCK: [u32; 2] = [64, 4];

pub(super) fn print(k: &KernelParts, sweep: &Sweep) -> CudaKernel {
    // The layout axis of the column (the stencil's last axis), and the block: one thread along
    // it, `COLUMN_BLOCK` along the other two in layout order.
    let column = k.geo.layout.iter().position(|&a| a == k.ir.dim - 1).expect("the column axis is a layout axis");
    if column == 0 {
        if let Some(kernel) = super::column_staged::print(k, sweep) {
            return kernel;
        }
    }
    // The real axes across the columns, in layout order (a 2D stencil's phantom axis and a 1D
    // stencil's two get one thread): 64 x 4 threads over two, 256 over one.
    let across: Vec<usize> = (0..3).filter(|&l| l != column && k.geo.layout[l] < k.ir.dim).collect();
    let mut block = [1u32; 3];
    match across.as_slice() {
        [a, b] => (block[*a], block[*b]) = (COLUMN_BLOCK[0], COLUMN_BLOCK[1]),
        [a] => block[*a] = COLUMN_BLOCK[0] * COLUMN_BLOCK[1],
        _ => {}
    }
    let [bx, by, bz] = block;
    let stride = ["1LL", "S_M", "S_O"][column];
    let length = ["n_c", "n_m", "n_o"][column];
    let (level, levels, base, step) = (naming::C_LEVEL, naming::C_LEVELS, naming::C_BASE, naming::C_STEP);
    let at = match sweep.order {
        SweepOrder::Forward => level.to_string(),
        SweepOrder::Backward => format!("{levels} - 1 - {level}"),
    };
    let access = Global { k };
    let mut s = k.header(bx * by * bz);
    s.push_str(&format!(
        "    const int c = blockIdx.x * {bx} + threadIdx.x;
    const int m = blockIdx.y * {by} + threadIdx.y;
    const int o = blockIdx.z * {bz} + threadIdx.z;
    if (c >= n_c || m >= n_m || o >= n_o) return;
    const long long {base} = origin + c + m * S_M + o * S_O;
    const long long {step} = {stride};
    const int {levels} = {length};
    {{
        // The column's own scope: carried locals may take any name but the reserved ones.
{}        for (int {level} = 0; {level} < {levels}; ++{level}) {{
            const long long idx = {base} + (long long)({at}) * {step};
{}        }}
    }}
}}
",
        print_stmts(k.ir, &sweep.carried, &access, 8),
        print_stmts(k.ir, &k.ir.body, &access, 12)
    ));
    // The whole column per thread: one block along the column axis.
    let mut points_per_block = block;
    points_per_block[column] = u32::MAX;
    CudaKernel { source: s, entry: k.entry.clone(), block, points_per_block, shared_bytes: 0, line_points: 0 }
}
