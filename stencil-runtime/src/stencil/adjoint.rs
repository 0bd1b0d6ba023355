//! Running the adjoint stencils that `#[stencil(adjoint(u, ..))]` generates: the forward range's
//! mask they take as their last argument.
//!
//! The adjoint of a forward launch over a range `R` reads the forward outputs' cotangents only
//! where `range_mask` is nonzero (the forward wrote only there). Run it over `R` for the
//! adjoint with every input outside `R` held fixed, or over `R` grown by the forward's reach into
//! the linear inputs (every input point a variable):
//!
//! ```
//! use stencil_runtime::adjoint::range_mask;
//! use stencil_runtime::prelude::*;
//!
//! #[stencil(adjoint(u))]
//! fn smooth(idx: Idx1, k: f64, u: &Field1<f64>, out: &mut Field1<f64>) {
//!     out[idx] = u[idx] + k * (u[idx.ix::<1>()] - 2.0 * u[idx] + u[idx.ix::<-1>()]);
//! }
//!
//! let shape = Shape1::new([12]).halo(2);
//! let r = Loop1D::interior(&shape).shrink([1]); // the forward range
//! let u = Field1::from_fn(shape, |[i]| if (1..9).contains(&i) { (i as f64).sin() } else { 0.0 });
//! let mut out = Field1::zeros(shape);
//! Host.run(&r, Smooth, (0.25, &u, &mut out))?;
//! // The adjoint: y = out_bar in, u_bar accumulated, over r grown by the reach (1).
//! let y = Field1::from_fn(shape, |[i]| (i as f64).cos());
//! let mut u_bar = Field1::zeros(shape);
//! Host.run(&r.grow([1])?, SmoothAdjoint, (0.25, &mut u_bar, &y, &range_mask(shape, &r)))?;
//! // <F u, y> over r = <u, F^T y> (u is zero outside the adjoint's range).
//! let m: Field1<f64> = range_mask(shape, &r);
//! let (o, yv, mv, uv, ub) = (out.to_vec(), y.to_vec(), m.to_vec(), u.to_vec(), u_bar.to_vec());
//! let lhs: f64 = (0..o.len()).map(|p| o[p] * yv[p] * mv[p]).sum();
//! let rhs: f64 = (0..uv.len()).map(|p| uv[p] * ub[p]).sum();
//! assert!((lhs - rhs).abs() <= 1e-12 * lhs.abs());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::field::{Element, Field, Shape};
use crate::range::Loop;

/// The mask of `range` for fields of `shape`: 1 on the range's points, 0 elsewhere (halo
/// included). An adjoint stencil's last argument, for the range its forward ran over.
pub fn range_mask<T: Element + From<u8>, const D: usize>(shape: Shape<D>, range: &Loop<D>) -> Field<T, D> {
    let (begin, end) = (range.begin(), range.end());
    Field::from_fn(shape, |g| {
        let storage = shape.storage_of(g).expect("a point of the shape");
        let inside = (0..D).all(|a| storage[a] >= begin[a] && (storage[a] as isize) < end[a]);
        T::from(u8::from(inside))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mask_is_one_exactly_on_the_range() {
        let shape = Shape::new([6, 5]).halo(2);
        let range = Loop::from_bounds(shape.extent(), [1, 3], [7, 6]).expect("inside");
        let mask: Field<f64, 2> = range_mask(shape, &range);
        let mut ones = 0;
        for s in shape.storage_points() {
            let inside = (1..7).contains(&s[0]) && (3..6).contains(&s[1]);
            assert_eq!(mask.get(shape.to_global(s)), Some(if inside { 1.0 } else { 0.0 }), "{s:?}");
            ones += usize::from(inside);
        }
        assert_eq!(ones, range.points());
    }
}
