//! Point functions on the CPU: a stencil that evaluates a point function `f` at several offsets
//! (`f(idx)`, `f(idx.ix::<-1, 0, 0>())`, `f(idx.ix::<0, -1, 0>())`) computes `f` once per point
//! of a block, into a buffer, and its row function reads the values back, instead of computing
//! `f` again for every offset.
//!
//! The offsets are grouped by their component along the third axis (the axis blocks follow each
//! other along): a group holds `f` over the block's rows widened by the group's reach along the
//! contiguous axis and the block's row axis, so a value is computed once for its neighbours
//! along both (rows of a group at the block's edges are computed by both blocks). Along the third
//! axis, a task's blocks follow each other one plane apart: where a group of a block holds the
//! values a group of the thread's previous block of the same launch held (the plane below), they
//! are copied from there instead of computed again.

use super::RowBlock;
use crate::field::Shape;

/// Where a block's values of one point function are computed and read back (one per launch).
#[derive(Clone, Debug)]
pub struct PointLayout {
    /// Unique per layout made (so per launch): what a thread's record of its last block names.
    id: u64,
    /// Per group: its offset's component along the third axis (0 for 1D/2D), the smallest and
    /// largest offset along the contiguous axis and along the row axis.
    groups: Vec<Group>,
    /// Per call offset (in the order the stencil lists them): its group and its components
    /// along the contiguous and row axes.
    calls: Vec<(usize, [i32; 2])>,
    /// Storage distance along the third axis.
    outer_stride: isize,
    /// Storage distance along the row axis.
    row_stride: usize,
}

/// Calls whose offsets share their component along the third axis: computed over the block's
/// rows widened from `lo` to `hi` (along the contiguous axis, along the row axis).
#[derive(Clone, Debug)]
struct Group {
    outer: i32,
    lo: [i32; 2],
    hi: [i32; 2],
}

/// The rows of a group in one block: `rows` rows of `width` values, the first value of the
/// first row at storage offset `base`, rows `stride` apart in storage; in the buffer from
/// `start`, rows `width` apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupRows {
    /// Values per row.
    pub width: usize,
    /// Rows.
    pub rows: usize,
    /// Storage offset of the first value.
    pub base: usize,
    /// Storage distance between rows.
    pub stride: usize,
    /// Where the group's values start in the buffer.
    pub start: usize,
}

impl PointLayout {
    /// The layout for fields of `shape` and the point function's call `offsets`.
    pub fn new<const D: usize>(shape: &Shape<D>, offsets: &[[i32; 3]]) -> PointLayout {
        let axes = shape.element_order().axes::<D>();
        let strides = shape.strides();
        let (c, m, o) = (axes[0], (D > 1).then(|| axes[1]), (D > 2).then(|| axes[2]));
        let comp = |off: &[i32; 3], a: Option<usize>| a.map_or(0, |a| off[a]);
        let mut groups: Vec<Group> = Vec::new();
        let calls: Vec<(usize, [i32; 2])> = offsets
            .iter()
            .map(|off| {
                let (outer, at) = (comp(off, o), [off[c], comp(off, m)]);
                let g = match groups.iter().position(|g| g.outer == outer) {
                    Some(g) => g,
                    None => {
                        groups.push(Group { outer, lo: at, hi: at });
                        groups.len() - 1
                    }
                };
                let grp = &mut groups[g];
                grp.lo = [grp.lo[0].min(at[0]), grp.lo[1].min(at[1])];
                grp.hi = [grp.hi[0].max(at[0]), grp.hi[1].max(at[1])];
                (g, at)
            })
            .collect();
        // Every group widened by the reach of all calls, so that a group of one plane is the same
        // rows as another group of the plane above (reusable, see `earlier_values`).
        let lo = groups.iter().fold([i32::MAX; 2], |l, g| [l[0].min(g.lo[0]), l[1].min(g.lo[1])]);
        let hi = groups.iter().fold([i32::MIN; 2], |h, g| [h[0].max(g.hi[0]), h[1].max(g.hi[1])]);
        for g in &mut groups {
            (g.lo, g.hi) = (lo, hi);
        }
        // Groups in ascending order along the third axis: a block one plane above the last reads
        // the values of a group from a later group of the last block (see `earlier_values`).
        let mut order: Vec<usize> = (0..groups.len()).collect();
        order.sort_by_key(|&g| groups[g].outer);
        let rank: Vec<usize> =
            (0..groups.len()).map(|g| order.iter().position(|&o| o == g).expect("a group")).collect();
        let groups = order.iter().map(|&g| groups[g].clone()).collect();
        let calls = calls.into_iter().map(|(g, at): (usize, [i32; 2])| (rank[g], at)).collect();
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        PointLayout {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            groups,
            calls,
            outer_stride: o.map_or(0, |o| strides[o] as isize),
            row_stride: m.map_or(0, |m| strides[m]),
        }
    }

    /// Number of groups.
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// The block this thread ran just before `block` with point functions, if that was a block
    /// of the same launch (the launch's first layout is `self`), one plane below `block` and of
    /// the same size; records `block` as the thread's last.
    pub fn previous_block(&self, block: &RowBlock) -> Option<RowBlock> {
        let previous = LAST_BLOCK.replace(Some((self.id, *block)));
        let (id, last) = previous?;
        let below = block.base.checked_sub(self.outer_stride as usize)?;
        (id == self.id
            && self.outer_stride > 0
            && last.base == below
            && (last.len, last.rows, last.stride) == (block.len, block.rows, block.stride))
            .then_some(last)
    }

    /// Where in the buffer `previous` (the block [`PointLayout::previous_block`] returned) left
    /// the values of group `g` of `block`: a later group's place (copy before computing any
    /// group at or after it).
    pub fn earlier_values(&self, g: usize, previous: &RowBlock, block: &RowBlock) -> Option<usize> {
        let want = self.group_rows(g, block).base;
        (g + 1..self.groups.len())
            .find(|&h| self.group_rows(h, previous).base == want)
            .map(|h| self.group_rows(h, previous).start)
    }

    /// The rows of group `g` in `block`.
    ///
    /// # Panics
    /// If the block's rows do not follow the row axis (the runner's blocks always do).
    #[inline]
    pub fn group_rows(&self, g: usize, block: &RowBlock) -> GroupRows {
        assert!(
            block.rows <= 1 || block.stride == self.row_stride,
            "a block's rows follow the row axis (stride {}), not stride {}",
            self.row_stride,
            block.stride
        );
        let start = self.groups[..g].iter().map(|grp| extent(grp, block).0 * extent(grp, block).1).sum();
        let grp = &self.groups[g];
        let (width, rows) = extent(grp, block);
        let shift =
            grp.outer as isize * self.outer_stride + grp.lo[0] as isize + grp.lo[1] as isize * self.row_stride as isize;
        GroupRows { width, rows, base: block.base.wrapping_add_signed(shift), stride: self.row_stride, start }
    }

    /// Values per output that a block needs in the buffer.
    pub fn buffer_len(&self, block: &RowBlock) -> usize {
        self.groups.iter().map(|g| extent(g, block).0 * extent(g, block).1).sum()
    }

    /// Where the values of call `call` for row `r` of `block` start in the buffer.
    #[inline]
    pub fn call_start(&self, call: usize, r: usize, block: &RowBlock) -> usize {
        let (g, at) = self.calls[call];
        let grp = &self.groups[g];
        let rows = self.group_rows(g, block);
        rows.start + (r + (at[1] - grp.lo[1]) as usize) * rows.width + (at[0] - grp.lo[0]) as usize
    }
}

/// A group's values per row and rows in `block`.
fn extent(g: &Group, block: &RowBlock) -> (usize, usize) {
    (block.len + (g.hi[0] - g.lo[0]) as usize, block.rows + (g.hi[1] - g.lo[1]) as usize)
}

/// An element type of point function values, with a per-thread buffer of its own (taken and put
/// back by each block, so a block allocates nothing once its thread's buffer has grown).
pub trait PointElement: Copy + Default + 'static {
    /// This thread's buffer of this type, with at least `len` values (holding whatever an
    /// earlier block left: every value read is written first). Hand it back with
    /// [`PointElement::put_buffer`].
    fn take_buffer(len: usize) -> Vec<Self>;
    /// Hands a buffer back for the thread's next block.
    fn put_buffer(buffer: Vec<Self>);
}

macro_rules! point_element {
    ($($t:ident),*) => {$(
        impl PointElement for $t {
            #[inline]
            fn take_buffer(len: usize) -> Vec<Self> {
                let mut buffer = BUFFERS.with(|b| b.$t.take());
                if buffer.len() < len {
                    buffer.resize(len, Default::default());
                }
                buffer
            }
            #[inline]
            fn put_buffer(buffer: Vec<Self>) {
                BUFFERS.with(|b| b.$t.set(buffer));
            }
        }
    )*};
}

/// The per-thread buffers, one per element type.
#[allow(non_snake_case)]
#[derive(Default)]
struct Buffers {
    f32: std::cell::Cell<Vec<f32>>,
    f64: std::cell::Cell<Vec<f64>>,
    i32: std::cell::Cell<Vec<i32>>,
    u32: std::cell::Cell<Vec<u32>>,
    bool: std::cell::Cell<Vec<bool>>,
}

thread_local! {
    static BUFFERS: Buffers = Buffers::default();
    /// The layout id and the block of the last block this thread ran with point functions (its
    /// values are in the thread's buffers until the next such block).
    static LAST_BLOCK: std::cell::Cell<Option<(u64, RowBlock)>> = const { std::cell::Cell::new(None) };
}

point_element!(f32, f64, i32, u32, bool);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Order;

    #[test]
    fn calls_share_a_group_per_outer_offset_and_read_their_shifted_rows() {
        // 3D, x contiguous: strides (1, 10, 100) for a 10 x 10 x 10 storage.
        let shape = Shape::new([8, 8, 8]).halo(1).align(1);
        let s = shape.strides();
        assert_eq!(s, [1, 10, 100]);
        let offsets = [[0, 0, 0], [-1, 0, 0], [0, -1, 0], [0, 0, -1]];
        let layout = PointLayout::new(&shape, &offsets);
        assert_eq!(layout.groups(), 2);
        let block = RowBlock { base: shape.offset([2, 3, 4]), len: 5, rows: 3, stride: s[1] };
        // Groups in order along z (the plane below first), each widened by one value and one
        // row at the low end (the reach of all calls).
        let g0 = layout.group_rows(0, &block);
        assert_eq!((g0.width, g0.rows, g0.start), (6, 4, 0));
        assert_eq!(g0.base, shape.offset([1, 2, 3]));
        let g1 = layout.group_rows(1, &block);
        assert_eq!((g1.width, g1.rows, g1.start), (6, 4, 24));
        assert_eq!(g1.base, shape.offset([1, 2, 4]));
        assert_eq!(layout.buffer_len(&block), 48);
        // Row 1 of the block: the call at the point starts one value and one row in; the one
        // at x - 1 one row in; the one at y - 1 one value in; the one at z - 1 in the first group.
        assert_eq!(layout.call_start(0, 1, &block), 24 + 2 * 6 + 1);
        assert_eq!(layout.call_start(1, 1, &block), 24 + 2 * 6);
        assert_eq!(layout.call_start(2, 1, &block), 24 + 6 + 1);
        assert_eq!(layout.call_start(3, 1, &block), 2 * 6 + 1);
    }

    #[test]
    fn a_block_one_plane_up_finds_the_plane_below_in_the_last_blocks_values() {
        let shape = Shape::new([8, 8, 8]).halo(1).align(1);
        let layout = PointLayout::new(&shape, &[[0, 0, 0], [0, 0, -1], [1, 0, 0]]);
        let other = PointLayout::new(&shape, &[[0, 0, 0], [0, 0, -1], [1, 0, 0]]);
        let at = |k: usize| RowBlock { base: shape.offset([2, 3, k]), len: 5, rows: 3, stride: shape.strides()[1] };
        assert_eq!(layout.previous_block(&at(4)), None, "nothing before");
        let previous = layout.previous_block(&at(5)).expect("one plane below, same launch");
        assert_eq!(previous, at(4));
        // The plane below (group 0) is where the last block had its own plane (group 1).
        assert_eq!(layout.earlier_values(0, &previous, &at(5)), Some(layout.group_rows(1, &at(4)).start));
        assert_eq!(layout.earlier_values(1, &previous, &at(5)), None);
        // Not after a block two planes down, of another size, or of another launch.
        assert_eq!(layout.previous_block(&at(7)), None);
        assert_eq!(layout.previous_block(&RowBlock { len: 4, ..at(8) }), None);
        assert_eq!(other.previous_block(&RowBlock { len: 4, ..at(9) }), None);
        assert_eq!(layout.previous_block(&RowBlock { len: 4, ..at(10) }), None);
    }

    #[test]
    fn the_contiguous_axis_is_the_fields_own() {
        // Kij: k is contiguous, i is the row axis, j the third.
        let shape = Shape::new([4, 5, 6]).halo(2).order(Order::Kij);
        let layout = PointLayout::new(&shape, &[[0, 0, 0], [0, 0, 2], [-1, 0, 0], [0, 1, 0]]);
        assert_eq!(layout.groups(), 2);
        let block = RowBlock { base: shape.offset([1, 1, 1]), len: 3, rows: 2, stride: shape.strides()[0] };
        let g0 = layout.group_rows(0, &block);
        assert_eq!((g0.width, g0.rows), (3 + 2, 2 + 1));
        assert_eq!(g0.base, shape.offset([0, 1, 1]));
        let g1 = layout.group_rows(1, &block);
        assert_eq!(g1.base, shape.offset([0, 2, 1]), "widened like the first group");
    }
}
