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

mod column;
mod isa;
mod plan;
mod point_fns;
pub(crate) mod pool;
mod reduce;
mod settings;
mod stream;

pub use column::{for_each_column, SweepOrder};
pub use isa::{isa, set_isa, Isa};
pub use plan::{cache_sizes, caches, plan, set_tuning, tuning, Caches, Plan, Streaming, Tuning};
pub use point_fns::{GroupRows, PointElement, PointLayout};
pub(crate) use pool::affine_tasks;
pub use pool::ensure_pool;
pub use reduce::{for_each_row_reducing, Partials, RowSlots};
pub(crate) use settings::Choice;
pub use settings::{check_settings, settings, SettingError};
pub use stream::{stream_copy, DenormalMode};

use crate::field::{AlignedBuf, Element, Shape};
use crate::range::Loop;
use crate::stencil::StencilInfo;
use std::marker::PhantomData;

/// Points of a 1D range handed to one task (a multiple of the default alignment).
const CHUNK_1D: usize = 1 << 14;
/// Bytes of the L1 buffer of one output when outputs stream (a row is written in pieces of at
/// most this size).
const SCRATCH_BYTES: usize = 8192;
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

/// The rows of a [`RowBlock`] that one read reaches (row `r` of the block displaced by a constant
/// offset), checked against the field once for the whole block: the block function of the nest
/// takes its read rows from these, so a row costs no bounds check of its own.
#[derive(Clone, Copy, Debug)]
pub struct BlockRows<'a, T> {
    /// The field's first element.
    data: *const T,
    /// The first row's start in the field (meaningless when the block has no rows).
    start: usize,
    stride: usize,
    len: usize,
    rows: usize,
    _data: PhantomData<&'a [T]>,
}

// SAFETY: a view of a `&'a [T]`, as shareable as one.
unsafe impl<T: Sync> Sync for BlockRows<'_, T> {}
// SAFETY: as for `&'a [T]`.
unsafe impl<T: Sync> Send for BlockRows<'_, T> {}

impl<'a, T> BlockRows<'a, T> {
    /// The rows `block.row_base(r) + offset .. + block.len` of `data`, for every `r < block.rows`.
    ///
    /// # Panics
    /// If one of them does not lie inside `data` (the launch's validation rules that out, so this
    /// never fires for the nest's blocks).
    #[inline(always)]
    pub fn new(data: &'a [T], block: &RowBlock, offset: isize) -> Self {
        match Self::try_new(data, block, offset) {
            Some(rows) => rows,
            None => block_outside(block.base, block.len, block.rows, block.stride, offset, data.len()),
        }
    }

    /// [`BlockRows::new`], or `None` where a row lies outside `data`.
    #[inline(always)]
    pub fn try_new(data: &'a [T], block: &RowBlock, offset: isize) -> Option<Self> {
        let RowBlock { base, len, rows, stride } = *block;
        if rows > 0 {
            // The rows' starts grow with `r`: all lie inside `data` when the first starts at or
            // after its start and the last ends at or before its end.
            let end = base
                .checked_add_signed(offset)
                .and_then(|start| (rows - 1).checked_mul(stride)?.checked_add(start)?.checked_add(len));
            if end.is_none_or(|end| end > data.len()) {
                return None;
            }
        }
        Some(BlockRows {
            data: data.as_ptr(),
            start: base.wrapping_add_signed(offset),
            stride,
            len,
            rows,
            _data: PhantomData,
        })
    }

    /// Row `r` of the block (`r < rows`, else a panic; the compiler drops that check in a loop
    /// over `0..block.rows`).
    #[inline(always)]
    pub fn row(&self, r: usize) -> &'a [T] {
        if r >= self.rows {
            row_outside(r, self.rows);
        }
        // SAFETY: `new` checked that rows `0..rows` lie inside the field (`start + r * stride +
        // len <= data.len()` for `r < rows`, without overflow), and `r < rows`; the field is
        // borrowed shared for `'a`, so no `&mut` to it is alive.
        unsafe { std::slice::from_raw_parts(self.data.add(self.start + r * self.stride), self.len) }
    }
}

// The panics take their values by value: a reference would keep the `BlockRows` in memory
// instead of registers.
#[cold]
#[inline(never)]
fn block_outside(base: usize, len: usize, rows: usize, stride: usize, offset: isize, elements: usize) -> ! {
    let block = RowBlock { base, len, rows, stride };
    panic!("the rows of {block:?} displaced by {offset} reach outside a field of {elements} elements")
}

#[cold]
#[inline(never)]
fn row_outside(r: usize, rows: usize) -> ! {
    panic!("row {r} of a block of {rows}")
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

    /// The `len` values `offset` elements from `base`: a row of a level a column sweep has
    /// passed (read back by the sweep's next levels).
    ///
    /// # Safety
    /// No `&mut` row that overlaps it may be alive while the result is: only the body of
    /// [`for_each_column`] calls this, for rows of its own columns at levels it has finished.
    #[inline(always)]
    pub unsafe fn passed_row(&self, base: usize, offset: isize, len: usize) -> &[T] {
        let start = base.wrapping_add_signed(offset);
        assert!(
            start <= self.len && len <= self.len - start,
            "row {start}+{len} outside a field of {} elements",
            self.len
        );
        // SAFETY: in bounds (checked above); no overlapping `&mut` row is alive (caller).
        unsafe { std::slice::from_raw_parts(self.ptr.add(start), len) }
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
    /// `base + len` is at most every field's length (checked once per block by
    /// [`RowOutputs::holds`]); no two live results may overlap, and none may outlive `self`:
    /// only [`BlockOutputs`], which hands out disjoint rows of a checked block to a body that
    /// cannot keep them, calls this.
    unsafe fn rows<'r>(&self, base: usize, len: usize) -> Self::Rows<'r>;
    /// Whether every row of `block` lies inside every written field.
    fn holds(&self, block: &RowBlock) -> bool;
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
        debug_assert!(base + len <= self.len, "row {base}..{} outside a field of {} elements", base + len, self.len);
        // SAFETY: in bounds and disjoint from every other live row (caller: the block was
        // checked with `holds`).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(base), len) }
    }
    fn holds(&self, block: &RowBlock) -> bool {
        block.within(self.len)
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
        debug_assert!(base + len <= self.len, "row {base}..{} outside a field of {} elements", base + len, self.len);
        let bytes = len * std::mem::size_of::<T>();
        // SAFETY: in bounds and disjoint from other rows (caller), buffer distinct.
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
            #[allow(non_snake_case)]
            fn holds(&self, block: &RowBlock) -> bool {
                let ($($name,)+) = self;
                true $(&& $name.holds(block))+
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
/// No written field (a stencil that only reduces).
impl RowOutputs for () {
    type Rows<'r> = ();
    #[inline(always)]
    unsafe fn rows<'r>(&self, _base: usize, _len: usize) -> Self::Rows<'r> {}
    fn holds(&self, _block: &RowBlock) -> bool {
        true
    }
    const COUNT: usize = 0;
    fn elem_bytes(&self) -> usize {
        0
    }
    #[inline(always)]
    unsafe fn scratch_rows<'r>(&self, _scratch: *mut u8, _len: usize) -> Self::Rows<'r> {}
    #[inline(always)]
    unsafe fn stream_rows(&self, _scratch: *const u8, _base: usize, _len: usize, _isa: Isa) {}
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

/// Rows of one call of the generated body: `rows` runs of `len` points along the contiguous axis,
/// the `r`-th starting at storage offset `base + r * stride`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowBlock {
    /// Storage offset of the first point of the first row.
    pub base: usize,
    /// Points per row.
    pub len: usize,
    /// Number of rows.
    pub rows: usize,
    /// Storage distance between consecutive rows.
    pub stride: usize,
}

impl RowBlock {
    /// Storage offset of the first point of row `r`.
    #[inline(always)]
    pub fn row_base(&self, r: usize) -> usize {
        self.base + r * self.stride
    }

    /// Whether every row lies inside a field of `elements` elements (the rows' starts grow with
    /// `r`, so the last row decides).
    #[inline]
    pub fn within(&self, elements: usize) -> bool {
        self.rows == 0
            || (self.rows - 1)
                .checked_mul(self.stride)
                .and_then(|last| last.checked_add(self.base)?.checked_add(self.len))
                .is_some_and(|end| end <= elements)
    }
}

/// The written rows of one [`RowBlock`], handed out one at a time: the field's own rows, or,
/// when outputs stream, a buffer in L1 that is copied out with streaming stores when the next
/// row is asked for and when the block ends.
pub struct BlockOutputs<'a, O: RowOutputs> {
    outputs: &'a O,
    block: RowBlock,
    /// The streaming buffer (null: rows are the fields' own).
    scratch: *mut u8,
    /// The row whose values wait in the buffer.
    pending: Option<usize>,
    isa: Isa,
}

impl<'a, O: RowOutputs> BlockOutputs<'a, O> {
    /// The written rows of `block` (into the buffer at `scratch` when not null: `O::COUNT *
    /// SCRATCH_BYTES` bytes, 64-byte aligned, holding a row of `block.len` elements, used by
    /// nothing else while this lives).
    ///
    /// # Panics
    /// If a row of `block` does not lie inside every written field (checked here once, so that
    /// handing out a row needs no check of its own).
    fn new(outputs: &'a O, block: RowBlock, scratch: *mut u8, isa: Isa) -> Self {
        assert!(outputs.holds(&block), "{block:?} reaches outside a written field");
        BlockOutputs { outputs, block, scratch, pending: None, isa }
    }

    /// The written rows of row `r` of the block (`r < rows`); with streaming, the previous row's
    /// values go out first.
    #[inline(always)]
    pub fn row(&mut self, r: usize) -> O::Rows<'_> {
        assert!(r < self.block.rows, "row {r} of a block of {}", self.block.rows);
        let len = self.block.len;
        if self.scratch.is_null() {
            // SAFETY: inside every field (`new` checked the block and `r < rows`), rows of one
            // block are disjoint, blocks handed to different tasks are disjoint
            // (`for_each_row`), and `&mut self` keeps one result alive at a time.
            unsafe { self.outputs.rows(self.block.row_base(r), len) }
        } else {
            self.flush();
            self.pending = Some(r);
            // SAFETY: the task's own buffer (`COUNT * SCRATCH_BYTES`, `len` fits), one result
            // alive at a time (`&mut self`).
            unsafe { self.outputs.scratch_rows(self.scratch, len) }
        }
    }

    /// Copies the buffered row (if any) to the fields.
    #[inline(always)]
    fn flush(&mut self) {
        if let Some(r) = self.pending.take() {
            // SAFETY: the destination row is this block's row `r` (inside every field: `new`
            // checked the block; disjoint from other tasks'), the buffer holds its values, and no
            // row result is alive (`&mut self`).
            unsafe { self.outputs.stream_rows(self.scratch, self.block.row_base(r), self.block.len, self.isa) }
        }
    }
}

/// Calls `body(block, outputs)` for blocks of rows covering `range` (runs along the contiguous
/// axis), in parallel as [`plan`] cuts it: tiles of a 3D range, each swept along the outer axis
/// one plane (a block of rows) at a time; bands of consecutive rows in 2D; chunks of the row in
/// 1D. `info` is the stencil's (its reach sizes the tiles); `write_only` says that no written
/// field is read, which allows streaming stores.
pub fn for_each_row<const D: usize, O: RowOutputs>(
    range: &Loop<D>,
    shape: &Shape<D>,
    info: &StencilInfo,
    write_only: bool,
    outputs: O,
    body: impl Fn(RowBlock, &mut BlockOutputs<'_, O>) + Sync,
) {
    if range.points() == 0 {
        return;
    }
    ensure_pool();
    let threads = rayon::current_num_threads();
    let plan = plan(range, shape, info, outputs.elem_bytes(), write_only, threads);
    if verbose() {
        let (caches, source) = plan::caches_and_source();
        eprintln!(
            "stencil {}: {range:?} on {threads} threads, {:?}, {plan:?}; caches {caches:?} (from {source:?})",
            info.name,
            isa()
        );
    }
    for_each_row_planned(range, shape, &plan, outputs, body)
}

/// Whether `STENCIL_CPU_VERBOSE=1` asks for every launch's plan on stderr.
fn verbose() -> bool {
    static VERBOSE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *VERBOSE.get_or_init(|| std::env::var("STENCIL_CPU_VERBOSE").is_ok_and(|v| v.trim() == "1"))
}

/// [`for_each_row`] under a given plan.
pub fn for_each_row_planned<const D: usize, O: RowOutputs>(
    range: &Loop<D>,
    shape: &Shape<D>,
    plan: &Plan,
    outputs: O,
    body: impl Fn(RowBlock, &mut BlockOutputs<'_, O>) + Sync,
) {
    if range.points() == 0 {
        return;
    }
    let axes = shape.element_order().axes::<D>();
    let strides = shape.strides();
    let n = range.len_per_axis();
    let origin = shape.offset(range.begin());
    let isa = isa();
    // Points per row piece when streaming (the buffer's size).
    let piece = if plan.stream { (SCRATCH_BYTES / outputs.elem_bytes().max(1)).max(1) } else { usize::MAX };
    // One task: the blocks `blocks` yields (disjoint from every other task's), rows cut into
    // pieces that fit the buffer when streaming.
    let task = |blocks: &mut dyn Iterator<Item = RowBlock>| {
        let _mode = DenormalMode::flush(plan.flush_denormals);
        let mut scratch = plan.stream.then(|| AlignedBuf::<u8>::zeroed(O::COUNT * SCRATCH_BYTES));
        let scratch = scratch.as_mut().map_or(std::ptr::null_mut(), |b| b.as_mut_ptr());
        for block in blocks {
            for start in (0..block.len).step_by(piece.min(block.len.max(1))) {
                let piece = RowBlock { base: block.base + start, len: piece.min(block.len - start), ..block };
                let mut out = BlockOutputs::new(&outputs, piece, scratch, isa);
                body(piece, &mut out);
                out.flush();
            }
        }
        if plan.stream {
            stream::store_fence();
        }
    };
    let c = axes[0];
    match D {
        1 => {
            let tasks = n[c].div_ceil(CHUNK_1D);
            run_tasks(tasks, |chunk| {
                let start = chunk * CHUNK_1D;
                let len = CHUNK_1D.min(n[c] - start);
                task(&mut std::iter::once(RowBlock { base: origin + start, len, rows: 1, stride: 0 }));
            })
        }
        2 => {
            let outer = axes[1];
            let band = plan.block[1].max(1);
            run_tasks(n[outer].div_ceil(band), |b| {
                let rows = band.min(n[outer] - b * band);
                let base = origin + b * band * strides[outer];
                task(&mut std::iter::once(RowBlock { base, len: n[c], rows, stride: strides[outer] }));
            });
        }
        _ => {
            // 2.5D blocking: a task owns a tile of the contiguous and middle axes and sweeps a
            // chunk of the outer axis, one plane of the tile per block, so the planes its reads
            // reach (o - r ..= o + r) stay in cache for the next o, and each input is read from
            // memory about once.
            let (middle, outer) = (axes[1], axes[2]);
            let [bc, bm, bo] = plan.block.map(|b| b.max(1));
            let tiles = [n[c].div_ceil(bc), n[middle].div_ceil(bm), n[outer].div_ceil(bo)];
            run_tasks(tiles.iter().product(), |t| {
                let (tc, tm, to) = (t % tiles[0], (t / tiles[0]) % tiles[1], t / (tiles[0] * tiles[1]));
                let c0 = tc * bc;
                let m0 = tm * bm;
                let (len, rows) = (bc.min(n[c] - c0), bm.min(n[middle] - m0));
                let os = to * bo..n[outer].min((to + 1) * bo);
                let corner = origin + m0 * strides[middle] + c0;
                task(&mut os.map(|o| RowBlock {
                    base: corner + o * strides[outer],
                    len,
                    rows,
                    stride: strides[middle],
                }));
            });
        }
    }
}

/// Runs `work(t)` for every task `t < tasks`, each once, on the calling thread and up to
/// `threads - 1` workers (rayon's thread count; the spinning pool's workers, or rayon's own when
/// another launch holds that pool or threads are pinned), which take the next task from a shared
/// counter (dynamic scheduling). The caller starts at once instead of sleeping until the workers
/// are done, workers still spinning from the last launch join without a wake-up, and a thread
/// slowed by other work takes fewer tasks.
fn run_tasks(tasks: usize, work: impl Fn(usize) + Sync) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let drain = || loop {
        let t = next.fetch_add(1, Ordering::Relaxed);
        if t >= tasks {
            break;
        }
        work(t);
    };
    let helpers = rayon::current_num_threads().min(tasks).saturating_sub(1);
    if helpers == 0 {
        return drain();
    }
    // The spinning pool (`pool::spin`): workers still awake from the last launch start at once.
    if pool::spin::enabled() && pool::by_seat() {
        // Each thread first takes the tasks of its seat, then any left.
        let claimed: Vec<std::sync::atomic::AtomicBool> =
            (0..tasks).map(|_| std::sync::atomic::AtomicBool::new(false)).collect();
        let seats = helpers + 1;
        let affine = || {
            let own = (pool::SEAT.get() % seats..tasks).step_by(seats);
            for t in own.chain(0..tasks) {
                // A load first: once the tasks are taken, threads sweeping the flags only read.
                if !claimed[t].load(Ordering::Relaxed) && !claimed[t].swap(true, Ordering::Relaxed) {
                    work(t);
                }
            }
        };
        if pool::spin::run(helpers, &affine) {
            return;
        }
    } else if pool::spin::enabled() && pool::spin::run(helpers, &drain) {
        return;
    }
    rayon::in_place_scope(|scope| {
        for _ in 0..helpers {
            scope.spawn(|_| drain());
        }
        drain();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block whose rows all lie inside the field gives, row by row, the slices a checked
    /// slicing gives; every block with a row outside (before the start, past the end, or an
    /// overflowing extent) is refused when its rows are taken, before any row is read. Blocks at
    /// every start and displacement around both ends of a small field.
    #[test]
    fn block_rows_are_the_checked_rows_and_refuse_a_block_outside() {
        let data: Vec<u32> = (0..64).collect();
        let (mut taken, mut refused) = (0, 0);
        for base in 0..=70usize {
            for offset in -8isize..=8 {
                for (len, rows, stride) in
                    [(4usize, 3usize, 10usize), (0, 2, 7), (9, 1, 0), (5, 0, 3), (1, 5, 11), (3, 2, 1)]
                {
                    let block = RowBlock { base, len, rows, stride };
                    let inside = (0..rows).all(|r| {
                        let start = (base + r * stride) as isize + offset;
                        start >= 0 && start as usize + len <= data.len()
                    });
                    match BlockRows::try_new(&data, &block, offset) {
                        Some(b) => {
                            assert!(inside, "{block:?} + {offset} reaches outside but was taken");
                            taken += 1;
                            for r in 0..rows {
                                let start = ((base + r * stride) as isize + offset) as usize;
                                assert_eq!(b.row(r), &data[start..start + len], "{block:?} + {offset}, row {r}");
                            }
                        }
                        None => {
                            assert!(!inside, "{block:?} + {offset} lies inside but was refused");
                            refused += 1;
                        }
                    }
                    let within = (0..rows).all(|r| base + r * stride + len <= data.len());
                    assert_eq!(block.within(data.len()), within, "{block:?}");
                }
            }
        }
        assert!(taken > 1000 && refused > 1000, "{taken} taken, {refused} refused");
        let huge = RowBlock { base: 1, len: 1, rows: 3, stride: usize::MAX / 2 };
        assert!(BlockRows::try_new(&data, &huge, 0).is_none(), "an overflowing extent");
        assert!(!huge.within(usize::MAX), "an overflowing extent");
        let outside = RowBlock { base: 60, len: 4, rows: 1, stride: 0 };
        assert!(std::panic::catch_unwind(|| BlockRows::new(&data, &outside, 1)).is_err(), "`new` refuses");
        let b = BlockRows::new(&data, &RowBlock { base: 0, len: 2, rows: 2, stride: 3 }, 0);
        assert!(std::panic::catch_unwind(|| b.row(2)).is_err(), "a row past the block");
    }

    /// The written rows of a block are checked once, when the block's outputs are made: a block
    /// with a row past the end of a written field is refused there.
    #[test]
    fn block_outputs_refuse_a_block_outside_a_written_field() {
        let (mut a, mut b) = (vec![0.0f32; 40], vec![0.0f32; 30]);
        {
            let (wa, wb) = (RowWriter::new(&mut a), RowWriter::new(&mut b));
            let outputs = (&wa, &wb);
            // Its last row ends at 35: inside `a` (40), past `b` (30).
            let past = RowBlock { base: 11, len: 4, rows: 3, stride: 10 };
            let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                BlockOutputs::new(&outputs, past, std::ptr::null_mut(), Isa::Baseline);
            }));
            assert!(refused.is_err(), "a block past the end of the second written field");
            let fits = RowBlock { base: 2, len: 4, rows: 3, stride: 10 };
            let mut out = BlockOutputs::new(&outputs, fits, std::ptr::null_mut(), Isa::Baseline);
            for r in 0..3 {
                let (ra, rb) = out.row(r);
                ra.fill(r as f32 + 1.0);
                rb.fill(-(r as f32) - 1.0);
            }
        }
        for r in 0..3 {
            assert!(a[2 + 10 * r..6 + 10 * r].iter().all(|&v| v == r as f32 + 1.0));
            assert!(b[2 + 10 * r..6 + 10 * r].iter().all(|&v| v == -(r as f32) - 1.0));
        }
        assert_eq!(a.iter().filter(|&&v| v != 0.0).count(), 12, "nothing written outside the block");
    }

    /// With tasks handed out by seat or from a shared counter, every task runs exactly once, for
    /// any number of tasks against threads; the guard of a pass asks for seats and restores what
    /// was there.
    #[test]
    fn tasks_by_seat_run_each_task_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        pool.install(|| {
            for seats in [true, false] {
                pool::AFFINE.set(Some(seats));
                assert_eq!(pool::by_seat(), seats);
                for tasks in [1, 2, 3, 5, 16, 37] {
                    for _ in 0..20 {
                        let runs: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                        run_tasks(tasks, |t| {
                            runs[t].fetch_add(1, Ordering::Relaxed);
                        });
                        assert!(runs.iter().all(|r| r.load(Ordering::Relaxed) == 1), "{tasks} tasks, seats {seats}");
                    }
                }
                let guard = super::affine_tasks();
                assert!(pool::by_seat());
                drop(guard);
                assert_eq!(pool::AFFINE.get(), Some(seats));
            }
            pool::AFFINE.set(None);
        });
    }
}
