//! Point functions on the CPU: a stencil that evaluates a point function `f` at several offsets
//! (`f(idx)`, `f(idx.ix::<-1, 0, 0>())`, `f(idx.ix::<0, -1, 0>())`) computes `f` once per point
//! of a block, into a buffer, and its row function reads the values back, instead of computing
//! `f` again for every offset.
//!
//! The offsets are grouped by their component along the third axis (the axis blocks follow each
//! other along): a group holds `f` over the block's rows widened by the group's reach along the
//! contiguous axis and the block's row axis, so a value is computed once for its neighbours
//! along both (rows of a group at the block's edges are computed by both blocks).

use super::RowBlock;
use crate::field::Shape;

/// Where a block's values of one point function are computed and read back (one per launch).
#[derive(Clone, Debug)]
pub struct PointLayout {
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
        let calls = offsets
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
        PointLayout {
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
    bool: std::cell::Cell<Vec<bool>>,
}

thread_local! {
    static BUFFERS: Buffers = Buffers::default();
}

point_element!(f32, f64, i32, bool);

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
        let g0 = layout.group_rows(0, &block);
        // Widened by one value and one row at the low end.
        assert_eq!((g0.width, g0.rows, g0.start), (6, 4, 0));
        assert_eq!(g0.base, shape.offset([1, 2, 4]));
        let g1 = layout.group_rows(1, &block);
        assert_eq!((g1.width, g1.rows, g1.start), (5, 3, 24));
        assert_eq!(g1.base, shape.offset([2, 3, 3]));
        assert_eq!(layout.buffer_len(&block), 24 + 15);
        // Row 1 of the block: the call at the point starts one value and one row in; the one
        // at x - 1 one row in; the one at y - 1 one value in, on the group's first row.
        assert_eq!(layout.call_start(0, 1, &block), 2 * 6 + 1);
        assert_eq!(layout.call_start(1, 1, &block), 2 * 6);
        assert_eq!(layout.call_start(2, 1, &block), 6 + 1);
        assert_eq!(layout.call_start(3, 1, &block), 24 + 5);
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
        assert_eq!(g1.base, shape.offset([1, 2, 1]));
    }
}
