//! Launch checks shared by every executor: the range must be well formed and built for the
//! fields' extent, the fields must agree in shape, and the range plus the stencil's reach must lie
//! inside every field. A failed check is an error that names the field and the numbers.

use crate::field::{FieldError, HaloError, Shape};
use crate::range::Loop;
use crate::stencil::StencilInfo;
use std::fmt;

const AXES: [&str; 3] = ["x (i)", "y (j)", "z (k)"];

/// Why a launch (or another executor operation) was refused or failed. Nothing was written when
/// a launch returns one of the checks' errors.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LaunchError {
    /// An axis of the range ends before it begins (`i0 + i1 > n`).
    InvertedRange {
        /// The stencil.
        stencil: &'static str,
        /// The range, described.
        range: String,
        /// The axis.
        axis: usize,
    },
    /// The range was built for another extent than the fields have.
    RangeExtent {
        /// The stencil.
        stencil: &'static str,
        /// The range, described.
        range: String,
        /// The axis.
        axis: usize,
        /// The range's `n` on that axis.
        range_extent: usize,
        /// The field compared.
        field: &'static str,
        /// The field's extent on that axis (interior + 2 halo).
        field_extent: usize,
    },
    /// Two fields of one launch differ in shape (size, halo, order or alignment).
    ShapeMismatch {
        /// The stencil.
        stencil: &'static str,
        /// The first field.
        first: &'static str,
        /// Its shape.
        first_shape: String,
        /// The field that differs.
        field: &'static str,
        /// Its shape.
        shape: String,
    },
    /// The range plus the stencil's reach leaves the field (its halo is too narrow).
    OutOfBounds {
        /// The stencil.
        stencil: &'static str,
        /// The field.
        field: &'static str,
        /// The axis.
        axis: usize,
        /// The offset that reaches outside (negative: low side).
        offset: i32,
        /// The range on that axis, storage coordinates, half-open.
        range: (usize, usize),
        /// The field's halo on that axis.
        halo: usize,
        /// The field's extent on that axis.
        extent: usize,
    },
    /// A field of the launch lives on another executor (another GPU, or the host).
    WrongDevice {
        /// The stencil.
        stencil: &'static str,
        /// The field.
        field: &'static str,
        /// The executor launched on.
        executor: String,
    },
    /// A copy between fields of different shapes.
    CopyShape {
        /// Shape of the field copied from.
        source_shape: String,
        /// Shape of the field copied to.
        destination_shape: String,
    },
    /// A halo fill that cannot work (axis, or an interior thinner than the halo).
    Halo(HaloError),
    /// Misuse of a field accessor (e.g. `read_range` with a range that does not fit).
    Field(FieldError),
    /// The CUDA executor failed (compile, launch, memory).
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::CudaError),
}

impl From<HaloError> for LaunchError {
    fn from(e: HaloError) -> Self {
        LaunchError::Halo(e)
    }
}

impl From<FieldError> for LaunchError {
    fn from(e: FieldError) -> Self {
        LaunchError::Field(e)
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::InvertedRange { stencil, range, axis } => write!(
                f,
                "stencil `{stencil}`: range {range} is inverted along {}: i0 + i1 exceeds n; use i0 + i1 <= n",
                AXES[*axis]
            ),
            LaunchError::RangeExtent { stencil, range, axis, range_extent, field, field_extent } => write!(
                f,
                "stencil `{stencil}`: range {range} was built for n = {} along {}, but field `{field}` has extent {field_extent} there (interior + 2 * halo); build the range from the field, e.g. `{}::interior({field}.shape())`",
                range_extent, AXES[*axis], range.split('[').next().unwrap_or("Loop3D")
            ),
            LaunchError::ShapeMismatch { stencil, first, first_shape, field, shape } => write!(
                f,
                "stencil `{stencil}`: fields of one launch must share one shape, but `{first}` is {first_shape} and `{field}` is {shape}; allocate them from the same `Shape`"
            ),
            LaunchError::OutOfBounds { stencil, field, axis, offset, range, halo, extent } => {
                let need = offset.unsigned_abs() as usize;
                let fix_range = if *offset < 0 {
                    format!("start the range at {need} or later")
                } else if need < *extent {
                    format!("end it at {} or earlier", extent - need)
                } else {
                    format!("make the field longer than {need} along that axis")
                };
                write!(
                    f,
                    "stencil `{stencil}`: field `{field}` is read at offset {offset} along {} over the range {}..{} but has halo {halo} (extent {extent}): the read leaves the field; give `{field}` a halo of at least {need} along {} (`Shape::halo`) or {fix_range}",
                    AXES[*axis], range.0, range.1, AXES[*axis]
                )
            }
            LaunchError::WrongDevice { stencil, field, executor } => write!(
                f,
                "stencil `{stencil}`: field `{field}` does not live on {executor}; allocate or upload it with that executor (every field of a launch on the executor that runs it)"
            ),
            LaunchError::CopyShape { source_shape, destination_shape } => write!(
                f,
                "copy: source shape ({source_shape}) differs from destination shape ({destination_shape}); allocate both from the same `Shape`"
            ),
            LaunchError::Halo(e) => write!(f, "{e}"),
            LaunchError::Field(e) => write!(f, "{e}"),
            #[cfg(feature = "cuda")]
            LaunchError::Cuda(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LaunchError {}

#[cfg(feature = "cuda")]
impl From<crate::cuda::CudaError> for LaunchError {
    fn from(e: crate::cuda::CudaError) -> Self {
        LaunchError::Cuda(e)
    }
}

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
