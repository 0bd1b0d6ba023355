//! Boundary conditions as halo fills: the halo of one axis copied from the interior (periodic,
//! zero-gradient, mirrored, mirrored with the sign flipped), on the host here and on a device in
//! `cuda/halo.rs` with the same index rule ([`HaloFill::source`]).

use super::{Element, Field};
use std::fmt;

/// How [`Field::fill_halo`] fills the halo of an axis from the interior. With `n` interior
/// points and halo layer `l = 1, 2, ...` counted outwards, the low end's layer (global
/// coordinate `-l`) takes:
///
/// | fill | from global | use |
/// |---|---|---|
/// | `Periodic` | `n - l` | periodic domains |
/// | `ZeroGradient` | `0` | outflow (zero normal gradient) |
/// | `Mirror` | `l - 1` | a wall, for quantities even about it |
/// | `MirrorNegated` | `l - 1`, negated | a wall, for the normal velocity or momentum |
///
/// and the high end (global `n - 1 + l`) the mirror image of that rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HaloFill {
    /// The opposite end of the interior: `-l ← n - l`.
    Periodic,
    /// The nearest interior point: `-l ← 0`.
    ZeroGradient,
    /// The interior mirrored about the boundary face: `-l ← l - 1`.
    Mirror,
    /// As `Mirror`, with the sign flipped.
    MirrorNegated,
}

impl HaloFill {
    /// The code the device kernel switches on.
    #[cfg(feature = "cuda")]
    pub(crate) fn code(self) -> i32 {
        self as i32
    }

    /// The global coordinate along the axis that halo layer `l` (1-based) at the low end
    /// (`high == false`) or high end takes its value from, for `n` interior points.
    pub(crate) fn source(self, high: bool, l: isize, n: isize) -> isize {
        let low = match self {
            HaloFill::Periodic => n - l,
            HaloFill::ZeroGradient => 0,
            HaloFill::Mirror | HaloFill::MirrorNegated => l - 1,
        };
        if high {
            n - 1 - low
        } else {
            low
        }
    }

    /// Whether the value is negated.
    pub(crate) fn negates(self) -> bool {
        self == HaloFill::MirrorNegated
    }
}

/// Why a halo cannot be filled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HaloError {
    /// The axis does not exist.
    NoSuchAxis {
        /// The axis asked for.
        axis: usize,
        /// The field's dimensionality.
        dims: usize,
    },
    /// The interior is thinner than the halo, so `Periodic` and the mirrors would read halo cells.
    InteriorThinnerThanHalo {
        /// The axis.
        axis: usize,
        /// Interior points along it.
        n: usize,
        /// Halo width along it.
        halo: usize,
        /// The fill asked for.
        fill: HaloFill,
    },
}

impl HaloError {
    /// The error's stable code (see the catalogue in [`crate::error`]).
    pub fn code(&self) -> &'static str {
        match self {
            HaloError::NoSuchAxis { .. } => "S0201",
            HaloError::InteriorThinnerThanHalo { .. } => "S0202",
        }
    }

    /// What went wrong, without the code and the help.
    pub fn message(&self) -> String {
        match self {
            HaloError::NoSuchAxis { axis, dims } => format!("fill_halo: axis {axis} does not exist in a {dims}D field"),
            HaloError::InteriorThinnerThanHalo { axis, n, halo, fill } => format!(
                "fill_halo: {fill:?} along axis {axis} needs at least as many interior points as halo layers, \
                 but the interior has {n} and the halo {halo}"
            ),
        }
    }

    /// What to change.
    pub fn help(&self) -> String {
        match self {
            HaloError::NoSuchAxis { dims, .. } => format!("use an axis below {dims}"),
            HaloError::InteriorThinnerThanHalo { .. } => {
                "enlarge the interior or use ZeroGradient (the only fill that reads just one layer)".to_string()
            }
        }
    }
}

impl fmt::Display for HaloError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]\nhelp: {}", self.message(), self.code(), self.help())
    }
}

impl std::error::Error for HaloError {}

/// Checks `axis` and `fill` against a field's interior and halo; returns `(n, halo)` of the axis.
pub(crate) fn check<const D: usize>(
    interior: [usize; D],
    halo: [usize; D],
    axis: usize,
    fill: HaloFill,
) -> Result<(usize, usize), HaloError> {
    if axis >= D {
        return Err(HaloError::NoSuchAxis { axis, dims: D });
    }
    let (n, h) = (interior[axis], halo[axis]);
    let needs_depth = fill != HaloFill::ZeroGradient;
    if (needs_depth && n < h) || (h > 0 && n == 0) {
        return Err(HaloError::InteriorThinnerThanHalo { axis, n, halo: h, fill });
    }
    Ok((n, h))
}

impl<T: Element, const D: usize> Field<T, D> {
    /// Fills the halo at both ends of `axis` from the interior by `fill` (see [`HaloFill`]),
    /// over the whole extent of the other axes, their halos included: filling every axis in
    /// turn fills edges and corners too. A boundary condition for the next stencil launch.
    ///
    /// ```
    /// use stencil_runtime::prelude::*;
    /// use stencil_runtime::HaloFill;
    ///
    /// let mut f = Field1::from_fn(Shape1::new([4]).halo(2), |[i]| i as f64);
    /// f.fill_halo(0, HaloFill::Periodic)?;
    /// assert_eq!((f.get([-2]), f.get([-1]), f.get([4]), f.get([5])), (Some(2.0), Some(3.0), Some(0.0), Some(1.0)));
    /// f.fill_halo(0, HaloFill::MirrorNegated)?;
    /// assert_eq!((f.get([-1]), f.get([-2]), f.get([4])), (Some(-0.0), Some(-1.0), Some(-3.0)));
    /// # Ok::<(), stencil_runtime::HaloError>(())
    /// ```
    pub fn fill_halo(&mut self, axis: usize, fill: HaloFill) -> Result<(), HaloError> {
        self.fill_halo_sides(axis, Some(fill), Some(fill))
    }

    /// [`Field::fill_halo`] with a fill per end of `axis` (`None` leaves that end as it is): a
    /// subdomain fills only the sides on the physical boundary.
    pub fn fill_halo_sides(
        &mut self,
        axis: usize,
        lo: Option<HaloFill>,
        hi: Option<HaloFill>,
    ) -> Result<(), HaloError> {
        let shape = self.shape;
        let mut n = 0;
        let mut h = 0;
        for fill in [lo, hi].into_iter().flatten() {
            (n, h) = check(shape.interior(), shape.halo_widths(), axis, fill)?;
        }
        if lo.is_none() && hi.is_none() {
            if axis >= D {
                return Err(HaloError::NoSuchAxis { axis, dims: D });
            }
            return Ok(());
        }
        let ext = shape.extent();
        let mut others = ext;
        others[axis] = 1;
        let total: usize = others.iter().product();
        for linear in 0..total {
            let mut rest = linear;
            let mut s: [usize; D] = std::array::from_fn(|a| {
                let c = rest % others[a];
                rest /= others[a];
                c
            });
            for (high, fill) in [(false, lo), (true, hi)] {
                let Some(fill) = fill else { continue };
                for l in 1..=h as isize {
                    let dst = if high { n as isize - 1 + l } else { -l };
                    s[axis] = (fill.source(high, l, n as isize) + h as isize) as usize;
                    let v = self.data[shape.offset(s)];
                    s[axis] = (dst + h as isize) as usize;
                    self.data[shape.offset(s)] = if fill.negates() { v.negated() } else { v };
                }
            }
        }
        Ok(())
    }
}
