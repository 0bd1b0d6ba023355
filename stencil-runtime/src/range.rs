//! ASUCA's iteration ranges: per axis `(n, i0, i1)`, applying a stencil from index `i0` to
//! `n - i1 - 1` in storage coordinates (0 is the first halo cell of a field of extent `n`).

use crate::field::{Element, Field, FieldError, Shape};
use std::fmt;

mod error;

pub use error::{RangeError, SparseError};

/// A `D`-dimensional iteration range. Use the aliases [`Loop1D`], [`Loop2D`], [`Loop3D`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Loop<const D: usize> {
    n: [usize; D],
    i0: [usize; D],
    i1: [usize; D],
}

/// A 1D range.
pub type Loop1D = Loop<1>;
/// A 2D range.
pub type Loop2D = Loop<2>;
/// A 3D range.
pub type Loop3D = Loop<3>;

impl Loop<1> {
    /// ASUCA's `Loop1D(n, i0, i1)`: points `i0 ..= n - i1 - 1` of an axis of extent `n`.
    pub fn new(n: usize, i0: usize, i1: usize) -> Self {
        Loop { n: [n], i0: [i0], i1: [i1] }
    }
}

impl Loop<2> {
    /// ASUCA's `Loop2D(nx, i0, i1, ny, j0, j1)`.
    pub fn new(nx: usize, i0: usize, i1: usize, ny: usize, j0: usize, j1: usize) -> Self {
        Loop { n: [nx, ny], i0: [i0, j0], i1: [i1, j1] }
    }
}

impl Loop<3> {
    /// ASUCA's `Loop3D(nx, i0, i1, ny, j0, j1, nz, k0, k1)`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        nx: usize,
        i0: usize,
        i1: usize,
        ny: usize,
        j0: usize,
        j1: usize,
        nz: usize,
        k0: usize,
        k1: usize,
    ) -> Self {
        Loop { n: [nx, ny, nz], i0: [i0, j0, k0], i1: [i1, j1, k1] }
    }
}

impl<const D: usize> Loop<D> {
    /// A range from its per-axis `(n, i0, i1)` triples as arrays.
    pub fn from_parts(n: [usize; D], i0: [usize; D], i1: [usize; D]) -> Self {
        Loop { n, i0, i1 }
    }

    /// The interior of a shape: every point but the halo.
    pub fn interior(shape: &Shape<D>) -> Self {
        Loop { n: shape.extent(), i0: shape.halo_widths(), i1: shape.halo_widths() }
    }

    /// Every point of a shape, halo included (only stencils that read no neighbour fit here).
    pub fn whole(shape: &Shape<D>) -> Self {
        Loop { n: shape.extent(), i0: [0; D], i1: [0; D] }
    }

    /// A sub-range given by half-open storage bounds `begin[a] .. end[a]` within extent `n`;
    /// an error where a bound lies beyond the extent or `begin` beyond `end` (no clamping).
    pub fn from_bounds(n: [usize; D], begin: [usize; D], end: [usize; D]) -> Result<Self, RangeError> {
        if let Some(a) = (0..D).find(|&a| end[a] > n[a] || begin[a] > end[a]) {
            return Err(RangeError::Bounds { axis: a, begin: begin[a], end: end[a], extent: n.to_vec() });
        }
        Ok(Self::within(n, begin, end))
    }

    /// [`Loop::from_bounds`] for bounds known to fit.
    pub(crate) fn within(n: [usize; D], begin: [usize; D], end: [usize; D]) -> Self {
        Loop { n, i0: begin, i1: std::array::from_fn(|a| n[a] - end[a]) }
    }

    /// The same range with `by[a]` points removed at both ends of axis `a` (e.g. the interior
    /// minus a boundary layer).
    pub fn shrink(self, by: [usize; D]) -> Self {
        Loop {
            n: self.n,
            i0: std::array::from_fn(|a| self.i0[a] + by[a]),
            i1: std::array::from_fn(|a| self.i1[a] + by[a]),
        }
    }

    /// The same range with `by[a]` points added at both ends of axis `a` (e.g. the interior plus
    /// one halo layer); an error where that leaves the extent (no clamping).
    pub fn grow(self, by: [usize; D]) -> Result<Self, RangeError> {
        if let Some(a) = (0..D).find(|&a| by[a] > self.i0[a] || by[a] > self.i1[a]) {
            return Err(RangeError::Grow {
                range: format!("{self:?}"),
                by: by.to_vec(),
                axis: a,
                below: self.i0[a],
                above: self.i1[a],
                extent: self.n[a],
            });
        }
        Ok(Loop {
            n: self.n,
            i0: std::array::from_fn(|a| self.i0[a] - by[a]),
            i1: std::array::from_fn(|a| self.i1[a] - by[a]),
        })
    }

    /// Extent per axis the range was built for.
    pub fn extent(&self) -> [usize; D] {
        self.n
    }

    /// First point per axis (storage coordinates).
    pub fn begin(&self) -> [usize; D] {
        self.i0
    }

    /// One past the last point per axis (storage coordinates); may be below `begin` for an
    /// inverted range, which launches reject.
    pub fn end(&self) -> [isize; D] {
        std::array::from_fn(|a| self.n[a] as isize - self.i1[a] as isize)
    }

    /// Points per axis (0 for an empty or inverted axis).
    pub fn len_per_axis(&self) -> [usize; D] {
        std::array::from_fn(|a| (self.end()[a] - self.i0[a] as isize).max(0) as usize)
    }

    /// Total points.
    pub fn points(&self) -> usize {
        self.len_per_axis().iter().product()
    }

    /// The points of both ranges (of one extent), or `None` when they share none.
    pub fn intersect(&self, other: &Loop<D>) -> Option<Loop<D>> {
        if self.n != other.n {
            return None;
        }
        let begin = std::array::from_fn(|a| self.i0[a].max(other.i0[a]));
        let end: [usize; D] = std::array::from_fn(|a| self.end()[a].min(other.end()[a]).max(0) as usize);
        (0..D).all(|a| begin[a] < end[a]).then(|| Self::within(self.n, begin, end))
    }
}

impl<const D: usize> fmt::Debug for Loop<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Loop{}D[", D)?;
        for a in 0..D {
            if a > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{}..{} of {}", self.i0[a], self.end()[a], self.n[a])?;
        }
        write!(f, "]")
    }
}

impl<T: Element, const D: usize> Field<T, D> {
    /// The values at the points of `range` (storage coordinates, as a launch takes them), axis
    /// 0 fastest; an error names the range and the shape if the range is inverted, built for
    /// another extent, or reaches outside the field.
    pub fn read_range(&self, range: &Loop<D>) -> Result<Vec<T>, FieldError> {
        let runs = row_runs(self.shape(), range).map_err(FieldError::Range)?;
        let data = self.as_slice();
        Ok(runs
            .into_iter()
            .flat_map(|(offset, stride, len)| (0..len).map(move |i| data[offset + i * stride]))
            .collect())
    }
}

/// The runs along axis 0 of the points of `range` in a field of `shape`, as `(offset of the first
/// point, stride along axis 0, points)`, in order of the other axes (axis 1 fastest). An error
/// ([`RangeError::DoesNotFit`]) names the range, the shape and the first axis where it does not
/// fit.
pub(crate) fn row_runs<const D: usize>(
    shape: &Shape<D>,
    range: &Loop<D>,
) -> Result<Vec<(usize, usize, usize)>, RangeError> {
    let (begin, end, n) = (range.begin(), range.end(), shape.extent());
    if let Some(axis) = (0..D).find(|&a| range.extent()[a] != n[a] || end[a] < begin[a] as isize) {
        return Err(RangeError::DoesNotFit {
            range: format!("{range:?}"),
            shape: shape.describe(),
            extent: n.to_vec(),
            axis,
        });
    }
    let len = range.len_per_axis();
    if len.contains(&0) {
        return Ok(Vec::new());
    }
    let rows: usize = len[1..].iter().product();
    let stride0 = shape.strides()[0];
    Ok((0..rows)
        .map(|r| {
            let mut rest = r;
            let start: [usize; D] = std::array::from_fn(|a| {
                if a == 0 {
                    return begin[0];
                }
                let c = begin[a] + rest % len[a];
                rest /= len[a];
                c
            });
            (shape.offset(start), stride0, len[0])
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asuca_triples_give_half_open_bounds() {
        let r = Loop3D::new(12, 1, 1, 10, 2, 0, 8, 0, 3);
        assert_eq!(r.begin(), [1, 2, 0]);
        assert_eq!(r.end(), [11, 10, 5]);
        assert_eq!(r.points(), 10 * 8 * 5);
        let s = Shape::new([10, 8, 6]).halo(1);
        assert_eq!(Loop3D::interior(&s), Loop3D::new(12, 1, 1, 10, 1, 1, 8, 1, 1));
        assert_eq!(Loop3D::interior(&s).grow([1, 1, 1]), Ok(Loop3D::whole(&s)));
        assert_eq!(Loop::from_bounds([12], [3], [7]).unwrap().len_per_axis(), [4]);
    }
}
