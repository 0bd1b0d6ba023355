//! [`RangeError`]: a range, a box or sparse points that do not fit what they were built for, as
//! data ([`Error::Range`](crate::Error::Range), S0108, and
//! [`FieldError::Range`](crate::FieldError::Range), S0214). Each variant names what was given
//! and what fits; `Display` says what to change. Sparse points refuse with their own type,
//! [`SparseError`], which [`RangeError::Sparse`] wraps.

use std::fmt;

/// A range (or a box of a field, or sparse points in a region) that cannot be built or does not
/// fit: what was asked and what fits.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RangeError {
    /// `Loop::from_bounds` got a bound beyond the extent, or `begin` beyond `end`.
    Bounds {
        /// The axis.
        axis: usize,
        /// The first point asked for along it.
        begin: usize,
        /// The end (exclusive) asked for along it.
        end: usize,
        /// The extent, every axis.
        extent: Vec<usize>,
    },
    /// `Loop::grow` by more points than lie outside the range.
    Grow {
        /// The range, described (`Loop3D[1..11 of 12, ...]`).
        range: String,
        /// The points asked for, per axis.
        by: Vec<usize>,
        /// The axis.
        axis: usize,
        /// The points below the range along it.
        below: usize,
        /// The points above the range along it.
        above: usize,
        /// The extent along it.
        extent: usize,
    },
    /// A range that does not fit a field: built for another extent, or inverted.
    DoesNotFit {
        /// The range, described.
        range: String,
        /// The field's shape, described.
        shape: String,
        /// The field's extent (interior and halo), every axis.
        extent: Vec<usize>,
        /// The first axis where the range does not fit.
        axis: usize,
    },
    /// A box that leaves its field (`read_box`, `write_box`).
    BoxOutside {
        /// The call.
        call: &'static str,
        /// The box's first storage point.
        at: Vec<usize>,
        /// Its points per axis.
        len: Vec<usize>,
        /// The field's shape, described.
        shape: String,
        /// The axis it leaves along.
        axis: usize,
    },
    /// A column sweep over more levels than its loop counts.
    ColumnLevels {
        /// The stencil.
        stencil: &'static str,
        /// The column axis.
        axis: usize,
        /// The range's levels along it.
        levels: usize,
        /// The most a launch takes.
        limit: usize,
    },
    /// Sparse points that do not fit their region.
    Sparse(SparseError),
}

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RangeError::Bounds { axis, begin, end, extent } => write!(
                f,
                "Loop::from_bounds: along axis {axis} the bounds {begin}..{end} do not lie in 0..{} (extent \
                 {extent:?}): give begin <= end <= extent on every axis",
                extent[*axis]
            ),
            RangeError::Grow { range, by, axis, below, above, extent } => write!(
                f,
                "Loop::grow by {by:?}: along axis {axis} the range {range} has {below} points below it and {above} \
                 above in an extent of {extent}: grow by at most {} there",
                below.min(above)
            ),
            RangeError::DoesNotFit { range, shape, extent, .. } => write!(
                f,
                "range {range} does not fit a field of {shape} (extent {extent:?}, begin <= end on every axis)"
            ),
            RangeError::BoxOutside { call, at, len, shape, axis } => {
                write!(f, "{call}: the box at {at:?} of {len:?} points leaves the field ({shape}) along axis {axis}")
            }
            RangeError::ColumnLevels { stencil, axis, levels, limit } => write!(
                f,
                "column sweep `{stencil}`: the range has more than {limit} levels along its last axis (axis {axis}: \
                 {levels}): split the launch"
            ),
            RangeError::Sparse(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RangeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RangeError::Sparse(e) => Some(e),
            _ => None,
        }
    }
}

impl From<SparseError> for RangeError {
    fn from(e: SparseError) -> Self {
        RangeError::Sparse(e)
    }
}

/// Sparse points that cannot be placed in their region
/// ([`SparsePoints::new`](crate::SparsePoints::new),
/// [`SparsePoints::on_nodes`](crate::SparsePoints::on_nodes)). Coordinates and spacings compare
/// bit for bit, so that the error is `Eq` (a NaN position equals itself).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum SparseError {
    /// A region with no node along an axis, or a spacing there that is not above 0.
    Region {
        /// The region, described.
        region: String,
        /// The axis.
        axis: usize,
        /// The region's nodes along it.
        nodes: usize,
        /// The spacing given along it.
        spacing: f64,
    },
    /// A position outside the region (from its first node to its last, both included).
    Outside {
        /// The point's index among those given.
        point: usize,
        /// Its position.
        position: Vec<f64>,
        /// The first axis along which it lies outside.
        axis: usize,
        /// The last node's position, per axis (the first is at 0).
        last: Vec<f64>,
        /// The node spacing, per axis.
        spacing: Vec<f64>,
    },
    /// A node outside the region.
    NodeOutside {
        /// The point's index among those given.
        point: usize,
        /// Its node (storage coordinates).
        node: Vec<usize>,
        /// The region, described.
        region: String,
    },
    /// [`Executor::add_at`](crate::Executor::add_at) got another number of values than points.
    Values {
        /// Points given.
        points: usize,
        /// Values given.
        values: usize,
    },
}

impl PartialEq for SparseError {
    fn eq(&self, other: &Self) -> bool {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        match (self, other) {
            (
                SparseError::Region { region, axis, nodes, spacing },
                SparseError::Region { region: r, axis: a, nodes: n, spacing: s },
            ) => (region, axis, nodes, spacing.to_bits()) == (r, a, n, s.to_bits()),
            (
                SparseError::Outside { point, position, axis, last, spacing },
                SparseError::Outside { point: p, position: q, axis: a, last: l, spacing: s },
            ) => {
                (point, axis) == (p, a)
                    && bits(position) == bits(q)
                    && bits(last) == bits(l)
                    && bits(spacing) == bits(s)
            }
            (
                SparseError::NodeOutside { point, node, region },
                SparseError::NodeOutside { point: p, node: n, region: r },
            ) => (point, node, region) == (p, n, r),
            (SparseError::Values { points, values }, SparseError::Values { points: p, values: v }) => {
                (points, values) == (p, v)
            }
            _ => false,
        }
    }
}

impl Eq for SparseError {}

impl fmt::Display for SparseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SparseError::Region { region, axis, nodes, spacing } => write!(
                f,
                "SparsePoints::new: axis {axis} of region {region} has {nodes} nodes and spacing {spacing}: give a \
                 non-empty region and a spacing > 0"
            ),
            SparseError::Outside { point, position, axis, last, spacing } => write!(
                f,
                "sparse point {point} at {position:?} lies outside the region along axis {axis}: give coordinates \
                 from 0 to {last:?} (node spacing {spacing:?} from the region's first node)"
            ),
            SparseError::NodeOutside { point, node, region } => write!(
                f,
                "sparse point {point} at node {node:?} lies outside the region {region}: give nodes inside the region"
            ),
            SparseError::Values { points, values } => {
                write!(f, "add_at: {points} points but {values} values: give one value per point")
            }
        }
    }
}

impl std::error::Error for SparseError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each variant's message names what was given, what fits and what to change.
    #[test]
    fn messages_name_the_numbers_and_the_fix() {
        let levels = RangeError::ColumnLevels { stencil: "settle", axis: 2, levels: 1 << 32, limit: i32::MAX as usize };
        assert_eq!(
            levels.to_string(),
            "column sweep `settle`: the range has more than 2147483647 levels along its last axis (axis 2: \
             4294967296): split the launch"
        );
        let fit = RangeError::DoesNotFit {
            range: "Loop1D[1..9 of 10]".into(),
            shape: "[6] + halo [1]".into(),
            extent: vec![8],
            axis: 0,
        };
        assert_eq!(
            fit.to_string(),
            "range Loop1D[1..9 of 10] does not fit a field of [6] + halo [1] (extent [8], begin <= end on every axis)"
        );
        let region = SparseError::Region { region: "Loop1D[2..2 of 4]".into(), axis: 0, nodes: 0, spacing: 1.5 };
        assert!(region.to_string().contains("has 0 nodes and spacing 1.5: give a non-empty region"), "{region}");
        let wrapped = RangeError::from(region.clone());
        assert_eq!(wrapped.to_string(), region.to_string());
        assert_eq!(std::error::Error::source(&wrapped).map(|s| s.to_string()), Some(region.to_string()));
        // Positions compare bit for bit: NaN equals itself, and 0.0 differs from -0.0.
        let at =
            |x: f64| SparseError::Outside { point: 0, position: vec![x], axis: 0, last: vec![3.0], spacing: vec![1.0] };
        assert_eq!(at(f64::NAN), at(f64::NAN));
        assert_ne!(at(0.0), at(-0.0));
        assert!(at(4.0).to_string().contains("sparse point 0 at [4.0] lies outside the region along axis 0"));
    }
}
