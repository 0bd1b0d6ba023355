//! Reductions in the CPU nest: each row of the range (whole rows, whatever the tiling) folds its
//! points in order into one partial result per reduction, kept in a slot of its own; after the
//! parallel sweep the slots are combined by a balanced tree in row order. So the result depends
//! only on the range and the values, not on the thread count, the tiles or the scheduling.

use super::{for_each_row_planned, plan, BlockOutputs, RowBlock, RowOutputs, CHUNK_1D};
use crate::field::Shape;
use crate::range::Loop;
use crate::stencil::reduce::{tree, ReduceElem, ReduceOp};
use crate::stencil::StencilInfo;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

/// Which slot the partial result of a row goes to: rows numbered in storage order (1D: chunks of
/// the row, `CHUNK_1D` points each).
#[derive(Clone, Copy, Debug)]
pub struct RowSlots {
    origin: usize,
    dim: usize,
    /// Storage stride of the middle and outer layout axes.
    stride: [usize; 2],
    /// Rows along the middle axis.
    middle: usize,
    count: usize,
}

impl RowSlots {
    /// The slots of the rows of `range` over fields of `shape`.
    pub fn new<const D: usize>(range: &Loop<D>, shape: &Shape<D>) -> Self {
        let axes = shape.element_order().axes::<D>();
        let strides = shape.strides();
        let n = range.len_per_axis();
        let origin = shape.offset(range.begin());
        let layout_n = |l: usize| if l < D { n[axes[l]] } else { 1 };
        let layout_stride = |l: usize| if l < D { strides[axes[l]] } else { 0 };
        let count = if range.points() == 0 {
            0
        } else if D == 1 {
            n[0].div_ceil(CHUNK_1D)
        } else {
            layout_n(1) * layout_n(2)
        };
        RowSlots { origin, dim: D, stride: [layout_stride(1), layout_stride(2)], middle: layout_n(1), count }
    }

    /// Number of slots.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The slot of the row (or 1D chunk) that starts at storage offset `base`.
    #[inline(always)]
    pub fn slot(&self, base: usize) -> usize {
        let d = base - self.origin;
        match self.dim {
            1 => d / CHUNK_1D,
            2 => d / self.stride[0],
            _ => (d / self.stride[1]) * self.middle + (d % self.stride[1]) / self.stride[0],
        }
    }
}

/// One partial result per row slot of one reduction, written by the rows' tasks in parallel.
pub struct Partials<T> {
    op: ReduceOp,
    slots: Vec<AtomicU64>,
    _elem: PhantomData<T>,
}

impl<T: ReduceElem> Partials<T> {
    /// `count` slots for a reduction by `op`, each holding the identity.
    pub fn new(op: ReduceOp, count: usize) -> Self {
        let id = crate::stencil::reduce::identity::<T>(op).to_bits64();
        Partials { op, slots: (0..count).map(|_| AtomicU64::new(id)).collect(), _elem: PhantomData }
    }

    /// The identity of the operator (what a row starts from).
    #[inline(always)]
    pub fn identity(&self) -> T {
        crate::stencil::reduce::identity(self.op)
    }

    /// Stores the partial result of the row of slot `slot`.
    #[inline(always)]
    pub fn put(&self, slot: usize, value: T) {
        self.slots[slot].store(value.to_bits64(), Ordering::Relaxed);
    }

    /// The slots combined in a balanced tree in slot order.
    pub fn total(&self) -> T {
        let values: Vec<T> = self.slots.iter().map(|s| T::from_bits64(s.load(Ordering::Relaxed))).collect();
        tree(self.op, &values)
    }
}

/// [`super::for_each_row`] for a stencil that reduces: the same plan, except that 3D tiles span
/// whole rows (each row's partial result is then one run in order) and outputs are not streamed
/// (streaming cuts rows into pieces).
pub fn for_each_row_reducing<const D: usize, O: RowOutputs>(
    range: &Loop<D>,
    shape: &Shape<D>,
    info: &StencilInfo,
    outputs: O,
    body: impl Fn(RowBlock, &mut BlockOutputs<'_, O>) + Sync,
) {
    if range.points() == 0 {
        return;
    }
    super::ensure_pool();
    let threads = rayon::current_num_threads();
    let mut plan = plan(range, shape, info, outputs.elem_bytes(), false, threads);
    plan.stream = false;
    plan.block[0] = range.len_per_axis()[shape.element_order().axes::<D>()[0]];
    for_each_row_planned(range, shape, &plan, outputs, body)
}
