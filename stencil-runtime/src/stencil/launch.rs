//! Launch checks shared by every executor: the range must be well formed and built for the
//! fields' extent, the fields must agree in shape, and the range plus the stencil's reach must lie
//! inside every field. A failed check is an error that names the field and the numbers.

pub use crate::error::LaunchError;

use crate::field::Shape;
use crate::range::Loop;
use crate::stencil::StencilInfo;

/// Checks a launch of `info` over `range` with the given field shapes (in parameter order) and
/// returns the common shape. An empty range is valid and runs nothing.
pub fn validate<const D: usize>(
    range: &Loop<D>,
    info: &StencilInfo,
    fields: &[(&'static str, &Shape<D>)],
) -> Result<Shape<D>, LaunchError> {
    let stencil = info.name;
    let end = range.end();
    for (axis, &e) in end.iter().enumerate() {
        if e < range.begin()[axis] as isize {
            return Err(LaunchError::InvertedRange { stencil, range: format!("{range:?}"), axis });
        }
    }
    let (first, shape) = *fields.first().expect("a stencil has at least one field");
    for &(name, s) in &fields[1..] {
        if s != shape {
            return Err(LaunchError::ShapeMismatch {
                stencil,
                first,
                first_shape: shape.describe(),
                field: name,
                shape: s.describe(),
            });
        }
    }
    let extent = shape.extent();
    for axis in 0..D {
        if range.extent()[axis] != extent[axis] {
            return Err(LaunchError::RangeExtent {
                stencil,
                range: format!("{range:?}"),
                axis,
                range_extent: range.extent()[axis],
                field: first,
                field_extent: extent[axis],
            });
        }
    }
    if range.points() == 0 {
        return Ok(*shape);
    }
    for fi in info.fields {
        for axis in 0..D {
            let (b, e) = (range.begin()[axis] as isize, end[axis]);
            let reach = [
                (fi.lo[axis], b + (fi.lo[axis] as isize) < 0),
                (fi.hi[axis], e - 1 + fi.hi[axis] as isize >= extent[axis] as isize),
            ];
            if let Some(&(offset, _)) = reach.iter().find(|(_, outside)| *outside) {
                return Err(LaunchError::OutOfBounds {
                    stencil,
                    field: fi.name,
                    axis,
                    offset,
                    range: (b as usize, e as usize),
                    halo: shape.halo_widths()[axis],
                    extent: extent[axis],
                });
            }
        }
    }
    Ok(*shape)
}
