//! The CPU executor: hands the rows of a range (runs along the contiguous axis) to the generated
//! loop body, in parallel over the slowest axis with rayon.
//!
//! Soundness of the parallel writes rests on three facts: rows handed out are disjoint; a written
//! field is reached only through the `&mut` row slice this module creates for it (the IR forbids
//! reading it at any other offset); and `validate` checked that every row lies inside every field.

use crate::field::{Element, Shape};
use crate::range::Loop;
use rayon::prelude::*;
use std::marker::PhantomData;

/// Points of a 1D range handed to one task (a multiple of the default alignment).
const CHUNK_1D: usize = 1 << 14;

/// Linear offset in elements of a constant stencil offset, for a field with `strides`.
#[inline]
pub fn linear_offset<const D: usize>(strides: &[usize; D], offset: [i32; 3]) -> isize {
    (0..D).map(|a| offset[a] as isize * strides[a] as isize).sum()
}

/// The `len` values of `data` starting `offset` elements from `base` (a neighbour row).
#[inline(always)]
pub fn row<T>(data: &[T], base: usize, offset: isize, len: usize) -> &[T] {
    let start = base.wrapping_add_signed(offset);
    &data[start..start + len]
}

/// Shared access to a written field, handing out one `&mut` row at a time.
pub struct RowWriter<'a, T> {
    ptr: *mut T,
    len: usize,
    _field: PhantomData<&'a mut [T]>,
}

// SAFETY: rows handed to different threads are disjoint (see the module docs).
unsafe impl<T: Send> Sync for RowWriter<'_, T> {}
// SAFETY: as for `&mut [T]`.
unsafe impl<T: Send> Send for RowWriter<'_, T> {}

impl<'a, T: Element> RowWriter<'a, T> {
    /// Wraps a written field's storage for the duration of one launch.
    pub fn new(data: &'a mut [T]) -> Self {
        RowWriter { ptr: data.as_mut_ptr(), len: data.len(), _field: PhantomData }
    }
}

/// The written fields of a launch: a tuple of `&RowWriter` (up to 16), turned into a tuple of
/// `&mut` rows.
pub trait RowOutputs: Sync {
    /// One `&mut [T]` per written field.
    type Rows<'r>;
    /// The rows at `base .. base + len` of every written field.
    ///
    /// # Safety
    /// No two live results may overlap, and none may outlive `self`: only [`for_each_row`],
    /// which hands out disjoint rows to a body that cannot keep them, calls this.
    unsafe fn rows<'r>(&self, base: usize, len: usize) -> Self::Rows<'r>;
}

impl<T: Element> RowOutputs for &RowWriter<'_, T> {
    type Rows<'r> = &'r mut [T];
    #[inline(always)]
    unsafe fn rows<'r>(&self, base: usize, len: usize) -> &'r mut [T] {
        assert!(base + len <= self.len, "row {base}..{} outside a field of {} elements", base + len, self.len);
        // SAFETY: in bounds (checked above); disjoint from every other live row (caller).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(base), len) }
    }
}

macro_rules! tuple_outputs {
    ($($name:ident),+) => {
        impl<$($name: RowOutputs),+> RowOutputs for ($($name,)+) {
            type Rows<'r> = ($($name::Rows<'r>,)+);
            #[inline(always)]
            #[allow(non_snake_case)]
            unsafe fn rows<'r>(&self, base: usize, len: usize) -> Self::Rows<'r> {
                let ($($name,)+) = self;
                // SAFETY: forwarded contract; distinct fields never overlap.
                unsafe { ($($name.rows(base, len),)+) }
            }
        }
    };
}
tuple_outputs!(A);
tuple_outputs!(A, B);
tuple_outputs!(A, B, C);
tuple_outputs!(A, B, C, E);
tuple_outputs!(A, B, C, E, F);
tuple_outputs!(A, B, C, E, F, G);
tuple_outputs!(A, B, C, E, F, G, H);
tuple_outputs!(A, B, C, E, F, G, H, I);
tuple_outputs!(A, B, C, E, F, G, H, I, J);
tuple_outputs!(A, B, C, E, F, G, H, I, J, K);
tuple_outputs!(A, B, C, E, F, G, H, I, J, K, L);
tuple_outputs!(A, B, C, E, F, G, H, I, J, K, L, M);
tuple_outputs!(A, B, C, E, F, G, H, I, J, K, L, M, N);
tuple_outputs!(A, B, C, E, F, G, H, I, J, K, L, M, N, O);
tuple_outputs!(A, B, C, E, F, G, H, I, J, K, L, M, N, O, P);
tuple_outputs!(A, B, C, E, F, G, H, I, J, K, L, M, N, O, P, Q);

/// Rows per band of the 3D sweep: at most 16 (a radius-4 stencil's 9 planes of 24 rows stay
/// well inside a core's L2), and small enough to give every thread several bands.
fn band_rows(rows: usize, threads: usize) -> usize {
    rows.div_ceil(4 * threads.max(1)).clamp(1, 16)
}

/// Calls `body(base, len, rows)` once for every row of `range` (a run along the contiguous axis
/// starting at storage offset `base`), in parallel: over bands of the middle axis in 3D (each
/// band swept along the outer axis), over the outer axis in 2D, over chunks of the row in 1D.
pub fn for_each_row<const D: usize, O: RowOutputs>(
    range: &Loop<D>,
    shape: &Shape<D>,
    outputs: O,
    body: impl Fn(usize, usize, O::Rows<'_>) + Sync,
) {
    if range.points() == 0 {
        return;
    }
    let axes = shape.element_order().axes::<D>();
    let strides = shape.strides();
    let begin = range.begin();
    let len = range.len_per_axis();
    let origin = shape.offset(begin);
    let c = axes[0];
    // SAFETY (all three arms): each (base, len) pair below is produced exactly once and the rows
    // they describe are disjoint, since they differ in at least one non-contiguous coordinate or
    // cover disjoint chunks of the one row.
    let run = |base: usize, n: usize| body(base, n, unsafe { outputs.rows(base, n) });
    match D {
        1 => (0..len[c].div_ceil(CHUNK_1D)).into_par_iter().for_each(|chunk| {
            let start = chunk * CHUNK_1D;
            run(origin + start, CHUNK_1D.min(len[c] - start));
        }),
        2 => {
            let outer = axes[1];
            (0..len[outer]).into_par_iter().for_each(|o| run(origin + o * strides[outer], len[c]));
        }
        _ => {
            // 2.5D cache blocking: a task owns a band of rows along the middle axis and sweeps the
            // outer axis, so the planes a neighbour access touches (o - r ..= o + r) stay in
            // cache for the next o, and each input is read from memory about once.
            let (middle, outer) = (axes[1], axes[2]);
            let band = band_rows(len[middle], rayon::current_num_threads());
            (0..len[middle].div_ceil(band)).into_par_iter().for_each(|b| {
                let rows = b * band..len[middle].min((b + 1) * band);
                for o in 0..len[outer] {
                    for m in rows.clone() {
                        run(origin + o * strides[outer] + m * strides[middle], len[c]);
                    }
                }
            });
        }
    }
}
