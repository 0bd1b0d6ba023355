//! The shape of a field: interior size, halo (ASUCA's margin), element order and the padding of
//! the contiguous axis. Everything an executor needs to turn a coordinate into an offset.

use std::fmt;

/// Default alignment of the contiguous axis, in elements: 32 elements are 128 bytes of `f32`
/// (one GPU transaction) and keep 16-byte vector loads aligned for every element type. Being
/// counted in elements, it gives fields of different element types the same strides, so one
/// index serves every field of a launch.
pub const DEFAULT_ALIGN: usize = 32;

/// Element order of a field: which axis is contiguous in memory. The stencil text never changes
/// with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Order {
    /// The first index is fastest (`i`, then `j`, then `k`): C arrays indexed `[k][j][i]`.
    #[default]
    Ijk,
    /// The last index is fastest, then the others in order: `k`, `i`, `j` in 3D (the original
    /// ASUCA order, columns contiguous), `j`, `i` in 2D; the same as `Ijk` in 1D.
    Kij,
}

impl Order {
    /// The axes of a `D`-dimensional field from fastest to slowest.
    pub fn axes<const D: usize>(self) -> [usize; D] {
        let mut axes = [0usize; D];
        match self {
            Order::Ijk => axes.iter_mut().enumerate().for_each(|(i, a)| *a = i),
            Order::Kij => {
                axes[0] = D - 1;
                for (i, a) in axes.iter_mut().enumerate().skip(1) {
                    *a = i - 1;
                }
            }
        }
        axes
    }
}

/// The shape of a `D`-dimensional field. Build with [`Shape::new`] and the `halo`, `order` and
/// `align` setters; the derived layout (pitch, strides, leading pad) follows from those.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape<const D: usize> {
    interior: [usize; D],
    halo: [usize; D],
    order: Order,
    align: usize,
}

/// A 1D shape.
pub type Shape1 = Shape<1>;
/// A 2D shape.
pub type Shape2 = Shape<2>;
/// A 3D shape.
pub type Shape3 = Shape<3>;

impl<const D: usize> Shape<D> {
    /// A shape with the given interior size, no halo, `Order::Ijk` and the default alignment.
    pub fn new(interior: [usize; D]) -> Self {
        Shape { interior, halo: [0; D], order: Order::Ijk, align: DEFAULT_ALIGN }
    }

    /// The same shape with halo `width` on every side of every axis.
    pub fn halo(self, width: usize) -> Self {
        self.halo_per_axis([width; D])
    }

    /// The same shape with a halo per axis (the same width on both sides of an axis).
    pub fn halo_per_axis(mut self, halo: [usize; D]) -> Self {
        self.halo = halo;
        self
    }

    /// The same shape (halo, order, alignment) with another interior size: a subdomain's.
    pub fn with_interior(mut self, interior: [usize; D]) -> Self {
        self.interior = interior;
        self
    }

    /// The same shape in another element order.
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    /// The same shape with the contiguous axis aligned to `elements` (rounded up to a power of
    /// two; 1 turns padding off).
    pub fn align(mut self, elements: usize) -> Self {
        self.align = elements.max(1).next_power_of_two();
        self
    }

    /// Interior size per axis.
    pub fn interior(&self) -> [usize; D] {
        self.interior
    }

    /// Halo width per axis.
    pub fn halo_widths(&self) -> [usize; D] {
        self.halo
    }

    /// The alignment of the contiguous axis, in elements (a power of two).
    pub fn alignment(&self) -> usize {
        self.align
    }

    /// Element order.
    pub fn element_order(&self) -> Order {
        self.order
    }

    /// Size per axis including both halos: the `n` of ASUCA's ranges.
    pub fn extent(&self) -> [usize; D] {
        std::array::from_fn(|a| self.interior[a] + 2 * self.halo[a])
    }

    /// The contiguous axis.
    pub fn contiguous_axis(&self) -> usize {
        self.order.axes::<D>()[0]
    }

    /// Padding before the first halo cell of each row, so that the first interior cell of every
    /// row is aligned.
    pub fn lead(&self) -> usize {
        let h = self.halo[self.contiguous_axis()];
        (self.align - h % self.align) % self.align
    }

    /// Elements from one row of the contiguous axis to the next: the row's extent rounded up
    /// to the alignment. A row's last elements may lie in the next row's lead (its padding):
    /// every row's first interior cell is still aligned, and rows never overlap.
    pub fn pitch(&self) -> usize {
        let c = self.contiguous_axis();
        self.extent()[c].div_ceil(self.align) * self.align
    }

    /// Stride of each axis in elements.
    pub fn strides(&self) -> [usize; D] {
        let axes = self.order.axes::<D>();
        let ext = self.extent();
        let mut strides = [0usize; D];
        let mut s = 1;
        for (rank, &a) in axes.iter().enumerate() {
            strides[a] = s;
            s *= if rank == 0 { self.pitch() } else { ext[a] };
        }
        strides
    }

    /// Elements of storage, padding included.
    pub fn len(&self) -> usize {
        let axes = self.order.axes::<D>();
        let ext = self.extent();
        let rows: usize = axes[1..].iter().map(|&a| ext[a]).product();
        if self.points() == 0 {
            0
        } else {
            self.lead() + self.pitch() * rows + self.tail_slack()
        }
    }

    /// Elements after the last row: vectorised GPU kernels load whole aligned groups of up to
    /// 4 elements, which may reach a few elements past the last point of the last row.
    fn tail_slack(&self) -> usize {
        self.align.max(8)
    }

    /// Whether the shape holds no point.
    pub fn is_empty(&self) -> bool {
        self.points() == 0
    }

    /// Points including halo, excluding padding.
    pub fn points(&self) -> usize {
        self.extent().iter().product()
    }

    /// Interior points.
    pub fn interior_points(&self) -> usize {
        self.interior.iter().product()
    }

    /// Offset in elements of a storage coordinate (0 is the first halo cell).
    pub fn offset(&self, storage: [usize; D]) -> usize {
        let strides = self.strides();
        self.lead() + (0..D).map(|a| storage[a] * strides[a]).sum::<usize>()
    }

    /// Storage coordinate of a global coordinate, or `None` outside the field (halo included).
    pub fn storage_of(&self, global: [isize; D]) -> Option<[usize; D]> {
        let ext = self.extent();
        let mut s = [0usize; D];
        for a in 0..D {
            let v = global[a] + self.halo[a] as isize;
            if v < 0 || v as usize >= ext[a] {
                return None;
            }
            s[a] = v as usize;
        }
        Some(s)
    }

    /// Global coordinate of a storage coordinate.
    pub fn to_global(&self, storage: [usize; D]) -> [isize; D] {
        std::array::from_fn(|a| storage[a] as isize - self.halo[a] as isize)
    }

    /// The rows of the box of `len` points at storage coordinate `at`, in layout order: the
    /// points per row (along the contiguous axis) and the storage offset of each row's first
    /// point.
    pub fn box_rows(&self, at: [usize; D], len: [usize; D]) -> (usize, impl Iterator<Item = usize> + 'static) {
        let shape = *self;
        let axes = shape.order.axes::<D>();
        let row_len = len[axes[0]];
        let rows = len.iter().product::<usize>().checked_div(row_len).unwrap_or(0);
        let iter = (0..rows).map(move |r| {
            let mut p = at;
            let mut rest = r;
            for &a in &axes[1..] {
                p[a] += rest % len[a];
                rest /= len[a];
            }
            shape.offset(p)
        });
        (row_len, iter)
    }

    /// Every storage coordinate (halo included) in element order, fastest axis first.
    pub fn storage_points(&self) -> impl Iterator<Item = [usize; D]> {
        let axes = self.order.axes::<D>();
        let ext = self.extent();
        let total = self.points();
        (0..total).map(move |mut flat| {
            let mut s = [0usize; D];
            for &a in &axes {
                s[a] = flat % ext[a];
                flat /= ext[a];
            }
            s
        })
    }

    /// A one-line description for error messages, e.g. `interior [10, 12, 8] halo [1, 1, 1] Ijk`.
    pub fn describe(&self) -> String {
        format!("interior {:?} halo {:?} {:?} align {}", self.interior, self.halo, self.order, self.align)
    }
}

impl<const D: usize> fmt::Debug for Shape<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Shape({})", self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interior_rows_are_aligned_and_offsets_are_distinct() {
        for order in [Order::Ijk, Order::Kij] {
            let s = Shape::new([5, 7, 3]).halo_per_axis([2, 1, 3]).order(order).align(8);
            let c = s.contiguous_axis();
            let mut seen = std::collections::HashSet::new();
            for p in s.storage_points() {
                let off = s.offset(p);
                assert!(off < s.len());
                assert!(seen.insert(off), "offset {off} used twice");
                if p[c] == s.halo_widths()[c] {
                    assert_eq!(off % 8, 0, "interior row start {p:?} not aligned");
                }
            }
            assert_eq!(seen.len(), s.points());
        }
    }

    #[test]
    fn rows_are_packed_to_the_alignment_and_never_overlap() {
        // A row may end in the next row's lead: the pitch is the extent rounded up to the
        // alignment, not the lead plus the extent (which padded 128 f32 with a halo of 1 to 192).
        for order in [Order::Ijk, Order::Kij] {
            for align in [1, 4, 16, 32] {
                for (n, h) in [(1, 0), (5, 1), (30, 1), (31, 1), (32, 1), (62, 1), (128, 1), (126, 4), (20, 3)] {
                    let s = Shape::new([n, 3, 2]).halo_per_axis([h, 1, h]).order(order).align(align);
                    let (c, e) = (s.contiguous_axis(), s.extent());
                    assert_eq!(s.pitch(), e[c].div_ceil(align) * align, "{order:?} n {n} h {h} align {align}");
                    let mut seen = std::collections::HashSet::new();
                    for p in s.storage_points() {
                        let off = s.offset(p);
                        assert!(off < s.len() && seen.insert(off), "offset {off} of {p:?}: outside or twice");
                        if p[c] == h && n > 0 {
                            assert_eq!(off % align, 0, "interior row start {p:?} not aligned");
                        }
                    }
                }
            }
        }
        assert_eq!(Shape::new([128, 4, 4]).halo(1).align(32).pitch(), 160);
    }

    #[test]
    fn the_rows_of_the_whole_storage_box_walk_the_points_in_their_order() {
        // `Field::from_vec` and `to_vec` copy rows; the element order is `storage_points`'.
        for order in [Order::Ijk, Order::Kij] {
            for (interior, halo) in [([5, 7, 3], [2, 1, 3]), ([1, 1, 1], [0, 0, 0]), ([4, 0, 2], [1, 1, 1])] {
                let s = Shape::new(interior).halo_per_axis(halo).order(order).align(8);
                let (row, starts) = s.box_rows([0; 3], s.extent());
                let by_rows: Vec<usize> = starts.flat_map(|start| start..start + row).collect();
                let by_points: Vec<usize> = s.storage_points().map(|p| s.offset(p)).collect();
                assert_eq!(by_rows, by_points, "{order:?} {interior:?} halo {halo:?}");
            }
        }
    }

    #[test]
    fn kij_puts_k_first() {
        assert_eq!(Order::Kij.axes::<3>(), [2, 0, 1]);
        assert_eq!(Order::Kij.axes::<2>(), [1, 0]);
        assert_eq!(Order::Ijk.axes::<3>(), [0, 1, 2]);
        let s = Shape::new([4, 5, 6]).order(Order::Kij).align(1);
        assert_eq!(s.strides(), [6, 24, 1]);
    }
}
