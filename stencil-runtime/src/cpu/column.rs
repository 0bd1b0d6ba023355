//! Column sweeps on the CPU: every column (the points that share all coordinates but the last)
//! is updated one level at a time, in the sweep's order, by one task; the columns of a task are
//! the rows of a tile of the plane across the columns, so each level is handed to the generated
//! body as one block of rows (runs along the contiguous axis, vectorised across columns).
//!
//! Soundness of the parallel writes rests on the facts `for_each_row` relies on, plus one: a
//! written field is read at another offset only at a level of the same column that the sweep
//! has passed (the IR allows no other), which the same task wrote in an earlier block or which
//! lies below (above) the range.
//!
//! Where the column axis is the contiguous one (`Order::Kij` fields, and any 1D sweep), walking
//! a tile level by level
//! would hand the body blocks of one-point rows. Instead each task gets a block whose rows are
//! whole columns (runs along the contiguous axis, all the levels of the range), and the generated
//! column function walks one column through all its levels in the sweep's order, its carried
//! locals plain scalars, before the next column: the same operations on every point in the same
//! order, only the traversal differs. Its written fields are reached through one window per
//! column ([`RowWriter::column_window`]) that also holds the levels it reads back.

use super::{isa, run_tasks, tuning, BlockOutputs, DenormalMode, RowBlock, RowOutputs, RowWriter};
use crate::field::{Element, Shape};
use crate::range::Loop;
pub use stencil_codegen::ir::SweepOrder;

/// Points of a row handed to one task at most (columns side by side along the contiguous axis).
const ROW_POINTS: usize = 1024;
/// Rows of a task's tile at most (along the next axis across the columns).
const TILE_ROWS: usize = 4;
/// Points of the columns handed to one task when the column axis is the contiguous one (whole
/// columns: at least one, even a longer one).
const COLUMN_POINTS: usize = 16384;

/// Calls `body(state, block, level, levels, outputs)` for every level of every column of
/// `range`, in parallel over tiles of columns: one task per tile walks the tile's levels in
/// `order` (`level` counts from 0 at the first level swept; `levels` is their number), with
/// `state = start(first block)` made once per tile (the carried locals of its columns).
///
/// Where the column axis is the contiguous one, calls `columns(block, levels)` instead, in
/// parallel over blocks whose rows are whole columns of the range (`block.len` points, its levels
/// in storage order from the range's first level): the callee walks each column in `order`.
pub fn for_each_column<const D: usize, O: RowOutputs, S>(
    range: &Loop<D>,
    shape: &Shape<D>,
    order: SweepOrder,
    outputs: O,
    start: impl Fn(RowBlock) -> S + Sync,
    body: impl Fn(&mut S, RowBlock, i32, i32, &mut BlockOutputs<'_, O>) + Sync,
    columns: impl Fn(RowBlock, i32) + Sync,
) {
    if range.points() == 0 {
        return;
    }
    super::ensure_pool();
    let column = D - 1;
    let axes = shape.element_order().axes::<D>();
    let strides = shape.strides();
    let n = range.len_per_axis();
    let origin = shape.offset(range.begin());
    if axes[0] == column {
        return for_each_contiguous_column(range, shape, columns);
    }
    // The row axis runs across columns along the contiguous axis (none when that axis is the
    // column's); the axes left across columns index the rows of a tile and the tiles.
    let row_axis = (axes[0] != column).then_some(axes[0]);
    let mut across = axes.iter().copied().filter(|&a| a != column && Some(a) != row_axis);
    let (rows_axis, tile_axis) = (across.next(), across.next());
    let extent = |a: Option<usize>| a.map_or(1, |a| n[a]);
    let stride = |a: Option<usize>| a.map_or(0, |a| strides[a]);
    let (row_len, row_count, tile_count) = (extent(row_axis), extent(rows_axis), extent(tile_axis));
    let (bc, bm) = (row_len.min(ROW_POINTS), row_count.min(TILE_ROWS));
    let tiles = [row_len.div_ceil(bc), row_count.div_ceil(bm), tile_count];
    let levels = n[column];
    let level_count = i32::try_from(levels).expect("a range's levels fit an i32 (the generated launch checks)");
    let (isa, flush) = (isa(), tuning().flush_denormals);
    run_tasks(tiles.iter().product(), |t| {
        let _mode = DenormalMode::flush(flush);
        let (tc, tm, to) = (t % tiles[0], (t / tiles[0]) % tiles[1], t / (tiles[0] * tiles[1]));
        let (c0, m0) = (tc * bc, tm * bm);
        let corner = origin + c0 * stride(row_axis) + m0 * stride(rows_axis) + to * stride(tile_axis);
        let tile = RowBlock {
            base: corner,
            len: bc.min(row_len - c0),
            rows: bm.min(row_count - m0),
            stride: stride(rows_axis),
        };
        let mut state = start(tile);
        for level in 0..levels {
            let at = match order {
                SweepOrder::Forward => level,
                SweepOrder::Backward => levels - 1 - level,
            };
            let block = RowBlock { base: corner + at * strides[column], ..tile };
            let mut out = BlockOutputs::new(&outputs, block, std::ptr::null_mut(), isa);
            body(&mut state, block, level as i32, level_count, &mut out);
        }
    });
}

/// [`for_each_column`] where the column axis is the contiguous one: blocks of up to
/// [`COLUMN_POINTS`] points of whole columns side by side along the next axis.
fn for_each_contiguous_column<const D: usize>(
    range: &Loop<D>,
    shape: &Shape<D>,
    columns: impl Fn(RowBlock, i32) + Sync,
) {
    let axes = shape.element_order().axes::<D>();
    let strides = shape.strides();
    let n = range.len_per_axis();
    let origin = shape.offset(range.begin());
    let levels = n[axes[0]];
    let level_count = i32::try_from(levels).expect("a range's levels fit an i32 (the generated launch checks)");
    let (rows_axis, tile_axis) = (axes.get(1).copied(), axes.get(2).copied());
    let extent = |a: Option<usize>| a.map_or(1, |a| n[a]);
    let stride = |a: Option<usize>| a.map_or(0, |a| strides[a]);
    let (row_count, tile_count) = (extent(rows_axis), extent(tile_axis));
    // At most COLUMN_POINTS per block, and blocks enough for four tasks per thread.
    let want = (rayon::current_num_threads() * 4).div_ceil(tile_count.max(1));
    let bm = (COLUMN_POINTS / levels).clamp(1, row_count).min(row_count.div_ceil(want).max(1));
    let tiles = [row_count.div_ceil(bm), tile_count];
    let flush = tuning().flush_denormals;
    run_tasks(tiles.iter().product(), |t| {
        let _mode = DenormalMode::flush(flush);
        let (tm, to) = (t % tiles[0], t / tiles[0]);
        let m0 = tm * bm;
        let block = RowBlock {
            base: origin + m0 * stride(rows_axis) + to * stride(tile_axis),
            len: levels,
            rows: bm.min(row_count - m0),
            stride: stride(rows_axis),
        };
        columns(block, level_count);
    });
}

impl<T: Element> RowWriter<'_, T> {
    /// The `below + len + above` values from `below` elements before `base`: the levels of one
    /// contiguous column of a sweep (`len` from `base`) and the levels it reads back below and
    /// above them.
    ///
    /// # Safety
    /// No other reference to any of these values may be alive while the result is: only the
    /// callee of [`for_each_column`]'s `columns` calls this, once per column of its block, for
    /// the column's own levels and the levels of the same column it reads back (every column
    /// lies in its own contiguous run of storage, and blocks hold distinct columns). The window
    /// stays inside its column only if `below` is at most the levels stored below `base` in the
    /// column and `len + above` at most the levels from `base` to the column's end: the launch
    /// checks that (`launch::validate` refuses a range whose reach along the column axis leaves
    /// a field), and the bounds check here only catches a window leaving the whole field.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn column_window(&self, base: usize, below: usize, len: usize, above: usize) -> &mut [T] {
        let start = base.wrapping_sub(below);
        let count = below + len + above;
        assert!(
            below <= base && start <= self.len && count <= self.len - start,
            "column {base}-{below}..+{len}+{above} outside a field of {} elements",
            self.len
        );
        // SAFETY: in bounds (checked above); no other reference to these values (caller).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), count) }
    }
}
