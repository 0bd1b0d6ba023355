//! The CPU executor: hands the rows of a range (runs along the contiguous axis) to the generated
//! loop body, in parallel with rayon, in tiles a small model picks ([`plan`]), with the outputs
//! written through an L1 buffer and non-temporal stores where that saves memory traffic.
//!
//! Soundness of the parallel writes rests on three facts: rows handed out are disjoint; a written
//! field is reached only through the `&mut` row slice this module creates for it (the IR forbids
//! reading it at any other offset); and `validate` checked that every row lies inside every field.
//! When outputs stream, the body writes into a per-task buffer that is then copied out: allowed
//! only when no written field is read (the macro says so), since the body then never reads what
//! it wrote.

mod isa;
mod plan;
mod stream;

pub use isa::{isa, set_isa, Isa};
pub use plan::{cache_sizes, plan, set_tuning, tuning, Plan, Streaming, Tuning};
pub use stream::{stream_copy, DenormalMode};

use crate::field::{AlignedBuf, Element, Shape};
use crate::range::Loop;
use crate::stencil::StencilInfo;
use rayon::prelude::*;
use std::marker::PhantomData;

/// Points of a 1D range handed to one task (a multiple of the default alignment).
const CHUNK_1D: usize = 1 << 14;
/// Bytes of the L1 buffer of one output when outputs stream (a row is written in pieces of at
/// most this size).
const SCRATCH_BYTES: usize = 4096;
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
    /// Number of written fields.
    const COUNT: usize;
    /// The largest element size of the written fields, in bytes.
    fn elem_bytes(&self) -> usize;
    /// Rows of `len` elements in the buffer at `scratch` (output `i` at `i * SCRATCH_BYTES`).
    ///
    /// # Safety
    /// `scratch` holds `COUNT * SCRATCH_BYTES` bytes, 64-byte aligned, `len` elements fit in
    /// `SCRATCH_BYTES`, and no other result for the same buffer is live.
    unsafe fn scratch_rows<'r>(&self, scratch: *mut u8, len: usize) -> Self::Rows<'r>;
    /// Copies the buffer's rows to `base .. base + len` of every written field with streaming
    /// stores.
    ///
    /// # Safety
    /// As [`RowOutputs::rows`] for the destination rows, and as `scratch_rows` for the buffer.
    unsafe fn stream_rows(&self, scratch: *const u8, base: usize, len: usize, isa: Isa);
}

impl<T: Element> RowOutputs for &RowWriter<'_, T> {
    type Rows<'r> = &'r mut [T];
    #[inline(always)]
    unsafe fn rows<'r>(&self, base: usize, len: usize) -> &'r mut [T] {
        assert!(base + len <= self.len, "row {base}..{} outside a field of {} elements", base + len, self.len);
        // SAFETY: in bounds (checked above); disjoint from every other live row (caller).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(base), len) }
    }
    const COUNT: usize = 1;
    fn elem_bytes(&self) -> usize {
        std::mem::size_of::<T>()
    }
    #[inline(always)]
    unsafe fn scratch_rows<'r>(&self, scratch: *mut u8, len: usize) -> &'r mut [T] {
        debug_assert!(len * std::mem::size_of::<T>() <= SCRATCH_BYTES);
        // SAFETY: caller's contract; the buffer is aligned for any element type.
        unsafe { std::slice::from_raw_parts_mut(scratch as *mut T, len) }
    }
    #[inline(always)]
    unsafe fn stream_rows(&self, scratch: *const u8, base: usize, len: usize, isa: Isa) {
        assert!(base + len <= self.len, "row {base}..{} outside a field of {} elements", base + len, self.len);
        let bytes = len * std::mem::size_of::<T>();
        // SAFETY: in bounds (checked above), disjoint from other rows (caller), buffer distinct.
        unsafe { stream_copy(self.ptr.add(base) as *mut u8, scratch, bytes, isa) }
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
            const COUNT: usize = 0 $(+ $name::COUNT)+;
            #[allow(non_snake_case)]
            fn elem_bytes(&self) -> usize {
                let ($($name,)+) = self;
                0 $(.max($name.elem_bytes()))+
            }
            #[inline(always)]
            #[allow(non_snake_case, unused_assignments)]
            unsafe fn scratch_rows<'r>(&self, scratch: *mut u8, len: usize) -> Self::Rows<'r> {
                let ($($name,)+) = self;
                let mut at = scratch;
                // SAFETY: each output gets its own `SCRATCH_BYTES` of the caller's buffer.
                unsafe { ($({ let r = $name.scratch_rows(at, len); at = at.add($name::COUNT * SCRATCH_BYTES); r },)+) }
            }
            #[inline(always)]
            #[allow(non_snake_case, unused_assignments)]
            unsafe fn stream_rows(&self, scratch: *const u8, base: usize, len: usize, isa: Isa) {
                let ($($name,)+) = self;
                let mut at = scratch;
                // SAFETY: forwarded contract, one buffer slot per output.
                unsafe { $( $name.stream_rows(at, base, len, isa); at = at.add($name::COUNT * SCRATCH_BYTES); )+ }
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

/// Calls `body(base, len, rows)` for every row piece of `range` (a run along the contiguous axis
/// starting at storage offset `base`), in parallel as [`plan`] cuts it: tiles of a 3D range,
/// each swept along the outer axis; bands of consecutive rows in 2D; chunks of the row in 1D.
/// `info` is the stencil's (its reach sizes the tiles); `write_only` says that no written field
/// is read, which allows streaming stores.
pub fn for_each_row<const D: usize, O: RowOutputs>(
    range: &Loop<D>,
    shape: &Shape<D>,
    info: &StencilInfo,
    write_only: bool,
    outputs: O,
    body: impl Fn(usize, usize, O::Rows<'_>) + Sync,
) {
    if range.points() == 0 {
        return;
    }
    let threads = rayon::current_num_threads();
    let plan = plan(range, shape, info, outputs.elem_bytes(), write_only, threads);
    for_each_row_planned(range, shape, &plan, outputs, body)
}

/// [`for_each_row`] under a given plan (tests run odd tiles through this).
pub fn for_each_row_planned<const D: usize, O: RowOutputs>(
    range: &Loop<D>,
    shape: &Shape<D>,
    plan: &Plan,
    outputs: O,
    body: impl Fn(usize, usize, O::Rows<'_>) + Sync,
) {
    if range.points() == 0 {
        return;
    }
    let axes = shape.element_order().axes::<D>();
    let strides = shape.strides();
    let n = range.len_per_axis();
    let origin = shape.offset(range.begin());
    let isa = isa();
    let piece = (SCRATCH_BYTES / outputs.elem_bytes().max(1)).max(1);
    // One task: the rows `rows` yields, through the scratch buffer when streaming.
    let task = |rows: &mut dyn Iterator<Item = (usize, usize)>| {
        let _mode = DenormalMode::flush(plan.flush_denormals);
        if plan.stream {
            let mut scratch = AlignedBuf::<u8>::zeroed(O::COUNT * SCRATCH_BYTES);
            let buf = scratch.as_mut_ptr();
            for (base, len) in rows {
                for start in (0..len).step_by(piece) {
                    let m = piece.min(len - start);
                    // SAFETY: the buffer has a slot per output; the rows it stands for are this
                    // task's alone (see `run` below); the body's rows end before the copy.
                    unsafe {
                        body(base + start, m, outputs.scratch_rows(buf, m));
                        outputs.stream_rows(buf, base + start, m, isa);
                    }
                }
            }
            stream::store_fence();
        } else {
            // SAFETY: each (base, len) pair below is produced exactly once and the rows they
            // describe are disjoint, since they differ in at least one non-contiguous coordinate
            // or cover disjoint pieces of one row.
            for (base, len) in rows {
                body(base, len, unsafe { outputs.rows(base, len) });
            }
        }
    };
    let c = axes[0];
    match D {
        1 => (0..n[c].div_ceil(CHUNK_1D)).into_par_iter().for_each(|chunk| {
            let start = chunk * CHUNK_1D;
            task(&mut std::iter::once((origin + start, CHUNK_1D.min(n[c] - start))));
        }),
        2 => {
            let outer = axes[1];
            let band = plan.block[1].max(1);
            (0..n[outer].div_ceil(band)).into_par_iter().for_each(|b| {
                let rows = b * band..n[outer].min((b + 1) * band);
                task(&mut rows.map(|o| (origin + o * strides[outer], n[c])));
            });
        }
        _ => {
            // 2.5D blocking: a task owns a tile of the contiguous and middle axes and sweeps a
            // chunk of the outer axis, so the planes its reads reach (o - r ..= o + r) stay in
            // cache for the next o, and each input is read from memory about once.
            let (middle, outer) = (axes[1], axes[2]);
            let [bc, bm, bo] = plan.block.map(|b| b.max(1));
            let tiles = [n[c].div_ceil(bc), n[middle].div_ceil(bm), n[outer].div_ceil(bo)];
            (0..tiles.iter().product::<usize>()).into_par_iter().for_each(|t| {
                let (tc, tm, to) = (t % tiles[0], (t / tiles[0]) % tiles[1], t / (tiles[0] * tiles[1]));
                let cs = tc * bc..n[c].min((tc + 1) * bc);
                let ms = tm * bm..n[middle].min((tm + 1) * bm);
                let os = to * bo..n[outer].min((to + 1) * bo);
                let mut rows = os.flat_map(|o| {
                    let (ms, cs) = (ms.clone(), cs.clone());
                    ms.map(move |m| (origin + o * strides[outer] + m * strides[middle] + cs.start, cs.len()))
                });
                task(&mut rows);
            });
        }
    }
}
