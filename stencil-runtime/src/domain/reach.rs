//! The halo a field needs, from the stencils that read it: the largest reach of their reads,
//! per axis, as the macro recorded it (`Stencil::INFO`), never a number typed by hand.

pub use crate::error::ReachError;
use crate::executor::Stencil;

/// Halo widths per axis, accumulated over the stencils that read a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HaloWidths<const D: usize>(pub [usize; D]);

impl<const D: usize> HaloWidths<D> {
    /// No halo.
    pub fn none() -> Self {
        HaloWidths([0; D])
    }

    /// These widths widened to cover the reads of parameter `field` of stencil `S` (the wider
    /// side of each axis: fields have one width per axis).
    pub fn read_by<S: Stencil<D>>(self, field: &str) -> Result<Self, ReachError> {
        let info = S::INFO.fields.iter().find(|f| f.name == field).ok_or_else(|| ReachError {
            stencil: S::INFO.name,
            field: field.to_string(),
            fields: S::INFO.fields.iter().map(|f| f.name).collect(),
        })?;
        Ok(HaloWidths(std::array::from_fn(|a| {
            self.0[a].max(info.lo[a].unsigned_abs() as usize).max(info.hi[a].unsigned_abs() as usize)
        })))
    }

    /// The widths of one stencil's parameter.
    pub fn of<S: Stencil<D>>(field: &str) -> Result<Self, ReachError> {
        Self::none().read_by::<S>(field)
    }
}
