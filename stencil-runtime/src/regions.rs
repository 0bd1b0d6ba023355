//! Splitting a range into an inner region and boundary slabs (Sai et al. 2020, section III.B):
//! each region gets its own launch (and functor), so no kernel branches on "am I near the
//! boundary". Used for absorbing layers (PML) and, later, for overlapping a halo exchange with
//! the computation of the points that do not need it.

use crate::range::Loop;
use std::fmt;

/// Widths of the boundary slabs of a range: `lo[a]` points at the low end of axis `a`, `hi[a]`
/// at its high end. Any width may be 0 (that slab is empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BoundaryWidths<const D: usize> {
    /// Slab widths at the low end of each axis.
    pub lo: [usize; D],
    /// Slab widths at the high end of each axis.
    pub hi: [usize; D],
}

impl<const D: usize> BoundaryWidths<D> {
    /// The same width `w` at both ends of every axis (e.g. a PML of `w` points).
    pub fn uniform(w: usize) -> Self {
        BoundaryWidths { lo: [w; D], hi: [w; D] }
    }

    /// Width `w[a]` at both ends of axis `a` (e.g. a stencil's reach per axis).
    pub fn per_axis(w: [usize; D]) -> Self {
        BoundaryWidths { lo: w, hi: w }
    }
}

/// One end of one axis: the slab of a [`Regions`] that touches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Side {
    /// The axis (0 = x, the first index).
    pub axis: usize,
    /// `true` for the high end of the axis, `false` for the low end.
    pub high: bool,
}

impl Side {
    /// The seismic names of the six sides in 3D, with depth `z` (axis 2) growing downwards:
    /// `left`/`right` (x low/high), `front`/`back` (y low/high), `top`/`bottom` (z low/high);
    /// `axis{a}-low`/`axis{a}-high` in other dimensions.
    pub fn name<const D: usize>(&self) -> String {
        const NAMES: [[&str; 2]; 3] = [["left", "right"], ["front", "back"], ["top", "bottom"]];
        match (D, self.axis) {
            (3, a) if a < 3 => NAMES[a][self.high as usize].to_string(),
            (_, a) => format!("axis{a}-{}", if self.high { "high" } else { "low" }),
        }
    }
}

/// A range split into an inner region and `2·D` boundary slabs that together cover every point
/// of the range exactly once. The slabs are cut from the outermost axis inwards, as in seed
/// paper 002: the two slabs of axis `D-1` span the whole range on the other axes (in 3D, `top`
/// and `bottom` are whole `xy` planes, contiguous in `ijk` storage); a slab of axis `a` spans
/// the whole range on the axes below `a` and the inner region's extent on the axes above it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Regions<const D: usize> {
    /// The points farther than the widths from every end of the range.
    pub inner: Loop<D>,
    /// `slabs[a][0]` and `slabs[a][1]`: the low and high slab of axis `a` (empty for width 0).
    pub slabs: [[Loop<D>; 2]; D],
}

impl<const D: usize> Regions<D> {
    /// The slab on `side`.
    pub fn slab(&self, side: Side) -> Loop<D> {
        self.slabs[side.axis][side.high as usize]
    }

    /// The `2·D` slabs with their sides, outermost axis first, low end before high end (in 3D:
    /// top, bottom, front, back, left, right). Empty slabs are included; launching one does
    /// nothing.
    pub fn boundary(&self) -> impl Iterator<Item = (Side, Loop<D>)> + '_ {
        (0..D).rev().flat_map(move |axis| {
            [false, true].into_iter().map(move |high| {
                let side = Side { axis, high };
                (side, self.slab(side))
            })
        })
    }

    /// All `2·D + 1` regions: the inner one first, then [`Regions::boundary`].
    pub fn all(&self) -> impl Iterator<Item = Loop<D>> + '_ {
        std::iter::once(self.inner).chain(self.boundary().map(|(_, r)| r))
    }
}

/// Why a range cannot be split with the given widths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegionError {
    /// The slabs of one axis are together wider than the range along it.
    WidthsExceedRange {
        /// The range being split (its `Debug` form).
        range: String,
        /// The axis.
        axis: usize,
        /// Points of the range along the axis.
        len: usize,
        /// Low and high widths asked for.
        lo: usize,
        /// See `lo`.
        hi: usize,
    },
    /// The range is inverted along an axis (its end lies before its begin).
    InvertedRange {
        /// The range being split.
        range: String,
        /// The axis.
        axis: usize,
    },
}

impl fmt::Display for RegionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegionError::WidthsExceedRange { range, axis, len, lo, hi } => write!(
                f,
                "cannot split {range} into regions: the slabs of axis {axis} are {lo} + {hi} = {} points wide but \
                 the range has {len} points along that axis; use widths that add up to at most {len} (an empty \
                 inner region is allowed) or a larger range",
                lo + hi
            ),
            RegionError::InvertedRange { range, axis } => write!(
                f,
                "cannot split {range} into regions: it ends before it begins along axis {axis}; build the range \
                 with i0 + i1 <= n on every axis"
            ),
        }
    }
}

impl std::error::Error for RegionError {}

impl<const D: usize> Loop<D> {
    /// Splits this range into the inner region and the `2·D` slabs of the given widths (see
    /// [`Regions`]). Fails when the slabs of an axis do not fit in the range along it.
    ///
    /// ```
    /// use stencil_runtime::prelude::*;
    ///
    /// let shape = Shape3::new([100, 80, 60]).halo(4);
    /// let regions = Loop3D::interior(&shape).split_boundary(BoundaryWidths::uniform(16))?;
    /// assert_eq!(regions.inner.len_per_axis(), [68, 48, 28]);
    /// let covered: usize = regions.all().map(|r| r.points()).sum();
    /// assert_eq!(covered, 100 * 80 * 60);
    /// # Ok::<(), stencil_runtime::RegionError>(())
    /// ```
    pub fn split_boundary(&self, widths: BoundaryWidths<D>) -> Result<Regions<D>, RegionError> {
        let (begin, end) = (self.begin(), self.end());
        for axis in 0..D {
            if end[axis] < begin[axis] as isize {
                return Err(RegionError::InvertedRange { range: format!("{self:?}"), axis });
            }
            let len = self.len_per_axis()[axis];
            let (lo, hi) = (widths.lo[axis], widths.hi[axis]);
            if lo.saturating_add(hi) > len {
                return Err(RegionError::WidthsExceedRange { range: format!("{self:?}"), axis, len, lo, hi });
            }
        }
        let end: [usize; D] = std::array::from_fn(|a| end[a] as usize);
        let inner_begin: [usize; D] = std::array::from_fn(|a| begin[a] + widths.lo[a]);
        let inner_end: [usize; D] = std::array::from_fn(|a| end[a] - widths.hi[a]);
        let n = self.extent();
        let slabs = std::array::from_fn(|axis| {
            // Whole range below `axis`, inner extent above it.
            let outer = |a: usize, inner: [usize; D], whole: [usize; D]| if a < axis { whole[a] } else { inner[a] };
            let lo_b: [usize; D] = std::array::from_fn(|a| outer(a, inner_begin, begin));
            let hi_e: [usize; D] = std::array::from_fn(|a| outer(a, inner_end, end));
            let mut low_end = hi_e;
            low_end[axis] = inner_begin[axis];
            let mut high_begin = lo_b;
            high_begin[axis] = inner_end[axis];
            let mut low_begin = lo_b;
            low_begin[axis] = begin[axis];
            let mut high_end = hi_e;
            high_end[axis] = end[axis];
            [Loop::within(n, low_begin, low_end), Loop::within(n, high_begin, high_end)]
        });
        Ok(Regions { inner: Loop::within(n, inner_begin, inner_end), slabs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::range::Loop3D;

    #[test]
    fn paper_order_top_bottom_then_front_back_then_left_right() {
        let r = Loop3D::new(20, 2, 2, 16, 2, 2, 12, 2, 2).split_boundary(BoundaryWidths::uniform(3)).unwrap();
        let sides: Vec<String> = r.boundary().map(|(s, _)| s.name::<3>()).collect();
        assert_eq!(sides, ["top", "bottom", "front", "back", "left", "right"]);
        // top: whole xy plane, 3 deep; front: whole x, inner z; left: inner y and z.
        assert_eq!(r.slabs[2][0].len_per_axis(), [16, 12, 3]);
        assert_eq!(r.slabs[1][1].len_per_axis(), [16, 3, 2]);
        assert_eq!(r.slabs[0][0].len_per_axis(), [3, 6, 2]);
        assert_eq!(r.inner.len_per_axis(), [10, 6, 2]);
    }

    #[test]
    fn too_wide_and_inverted_are_errors() {
        let range = Loop3D::new(10, 1, 1, 10, 1, 1, 10, 1, 1);
        let e = range.split_boundary(BoundaryWidths { lo: [0, 5, 0], hi: [0, 4, 0] }).unwrap_err();
        assert!(matches!(e, RegionError::WidthsExceedRange { axis: 1, len: 8, lo: 5, hi: 4, .. }), "{e}");
        assert!(e.to_string().contains("at most 8"), "{e}");
        let inverted = Loop3D::new(10, 6, 6, 10, 1, 1, 10, 1, 1);
        assert!(matches!(
            inverted.split_boundary(BoundaryWidths::uniform(0)),
            Err(RegionError::InvertedRange { axis: 0, .. })
        ));
    }
}
