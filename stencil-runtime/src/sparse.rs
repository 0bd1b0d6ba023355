//! Sparse points: sources and receivers at any coordinates of a grid, between its nodes.
//!
//! [`SparsePoints`] places each point in the cell of a region that holds it and gives it the
//! cell's nodes with multilinear weights (trilinear in 3D). A source is injected by launching
//! the model's injection stencil on each node's one-point range ([`SparsePoints::spread`]); a
//! receiver is sampled with [`SparsePoints::sample`], which reads the box of all the receivers'
//! nodes in one [`Executor::read_range`] and interpolates, or with [`SparsePoints::sample_later`],
//! which issues the same read without waiting for the executor ([`Samples::wait`] collects it).
//! All work on every executor: on the distributed one, each node range is cut to the part that
//! owns it and the read is gathered.

use crate::{Element, Executor, LaunchError, Loop, Readback, SparseError};
use std::sync::Arc;

/// One point's nodes (storage coordinates) and their weights.
type PointNodes<const D: usize> = Vec<([usize; D], f64)>;

/// Points at any coordinates of a region of a grid, each with the nodes of its cell and their
/// multilinear weights (the zero weights left out: a point on a node has that node alone, with
/// weight 1, so it reads and writes exactly that node's value).
#[derive(Clone, Debug, PartialEq)]
pub struct SparsePoints<const D: usize> {
    extent: [usize; D],
    nodes: Arc<[PointNodes<D>]>,
    bounds: ([usize; D], [usize; D]),
}

impl<const D: usize> SparsePoints<D> {
    /// Places `positions` in `region` (a range of storage coordinates, e.g. the physical domain
    /// without an absorbing layer), whose nodes lie `spacing[a]` apart along axis `a`. Positions
    /// are in the units of `spacing` from the region's first node. An error
    /// ([`SparseError::Outside`]) names the first position that lies outside the region (between
    /// its first and last node, bounds included).
    pub fn new(region: &Loop<D>, spacing: [f64; D], positions: &[[f64; D]]) -> Result<Self, SparseError> {
        let (first, len) = (region.begin(), region.len_per_axis());
        if let Some(a) = (0..D).find(|&a| len[a] == 0 || spacing[a].is_nan() || spacing[a] <= 0.0) {
            return Err(SparseError::Region {
                region: format!("{region:?}"),
                axis: a,
                nodes: len[a],
                spacing: spacing[a],
            });
        }
        let last: [f64; D] = std::array::from_fn(|a| (len[a] - 1) as f64 * spacing[a]);
        let mut nodes = Vec::with_capacity(positions.len());
        for (p, position) in positions.iter().enumerate() {
            if let Some(a) = (0..D).find(|&a| !(0.0..=last[a]).contains(&position[a])) {
                return Err(SparseError::Outside {
                    point: p,
                    position: position.to_vec(),
                    axis: a,
                    last: last.to_vec(),
                    spacing: spacing.to_vec(),
                });
            }
            let per_axis: [Vec<(usize, f64)>; D] = std::array::from_fn(|a| {
                let g = position[a] / spacing[a];
                let i0 = (g.floor().max(0.0) as usize).min(len[a] - 1);
                let frac = g - i0 as f64;
                if frac <= 0.0 || i0 + 1 >= len[a] {
                    vec![(first[a] + i0, 1.0)]
                } else {
                    vec![(first[a] + i0, 1.0 - frac), (first[a] + i0 + 1, frac)]
                }
            });
            nodes.push(outer_product(&per_axis));
        }
        Ok(Self::from_nodes(region.extent(), nodes))
    }

    /// Points on the nodes `at` (storage coordinates of a grid of extent `region.extent()`), each
    /// with weight 1: e.g. a line of receivers on grid points. An error
    /// ([`SparseError::NodeOutside`]) names a node outside `region`.
    pub fn on_nodes(region: &Loop<D>, at: &[[usize; D]]) -> Result<Self, SparseError> {
        let (begin, end) = (region.begin(), region.end());
        if let Some((p, node)) =
            at.iter().enumerate().find(|(_, n)| (0..D).any(|a| n[a] < begin[a] || n[a] as isize >= end[a]))
        {
            return Err(SparseError::NodeOutside { point: p, node: node.to_vec(), region: format!("{region:?}") });
        }
        Ok(Self::from_nodes(region.extent(), at.iter().map(|&n| vec![(n, 1.0)]).collect()))
    }

    fn from_nodes(extent: [usize; D], nodes: Vec<Vec<([usize; D], f64)>>) -> Self {
        let (mut lo, mut hi) = ([usize::MAX; D], [0; D]);
        for (node, _) in nodes.iter().flatten() {
            for a in 0..D {
                (lo[a], hi[a]) = (lo[a].min(node[a]), hi[a].max(node[a] + 1));
            }
        }
        if nodes.is_empty() {
            lo = [0; D];
        }
        SparsePoints { extent, nodes: nodes.into(), bounds: (lo, hi) }
    }

    /// How many points there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The nodes of point `p` (storage coordinates) and their weights, in a fixed order (axis 0
    /// fastest). Panics if `p` is not below [`SparsePoints::len`], as a slice index does.
    pub fn nodes(&self, p: usize) -> &[([usize; D], f64)] {
        &self.nodes[p]
    }

    /// What injecting `amount` at point `p` adds at each node: the node's one-point range and
    /// `amount` times its weight (`amount` itself, exactly, for a weight of 1). Panics if `p` is
    /// not below [`SparsePoints::len`], as a slice index does.
    pub fn spread(&self, p: usize, amount: f64) -> impl Iterator<Item = (Loop<D>, f64)> + '_ {
        self.nodes[p].iter().map(move |&(node, w)| {
            let range = Loop::within(self.extent, node, node.map(|v| v + 1));
            (range, if w == 1.0 { amount } else { amount * w })
        })
    }

    /// Adds `amounts[p]` at every point `p`, spread over its nodes as [`SparsePoints::spread`]
    /// spreads it, in one [`Executor::add_at`]: the bits of a launch per node in point order
    /// (a node shared by points gets their amounts in that order). Refused: another number of
    /// amounts than points.
    pub fn inject<E: Executor>(
        &self,
        exec: &E,
        field: &mut E::Field<f64, D>,
        amounts: &[f64],
    ) -> Result<(), LaunchError> {
        if amounts.len() != self.len() {
            return Err(SparseError::Values { points: self.len(), values: amounts.len() }.into());
        }
        let (mut nodes, mut values) = (Vec::new(), Vec::new());
        for (p, &amount) in amounts.iter().enumerate() {
            for &(node, w) in self.nodes[p].iter() {
                nodes.push(node);
                values.push(if w == 1.0 { amount } else { amount * w });
            }
        }
        exec.add_at(field, &nodes, &values)
    }

    /// The box of every point's nodes: what [`SparsePoints::sample`] reads at once when the
    /// points are close together.
    pub fn bounding_box(&self) -> Loop<D> {
        Loop::within(self.extent, self.bounds.0, self.bounds.1)
    }

    /// Every point's value of `field` on `exec`, interpolated from its nodes (a point on a node
    /// reads that node's value exactly). Points close together are read in one read of
    /// [`SparsePoints::bounding_box`]; points spread out (a box of more than 4 times their nodes,
    /// e.g. receivers on two faces of the grid) are read point by point, each the box of its own
    /// nodes, so that what moves is their nodes and not the grid between them. Both give the
    /// same bits. Waits for earlier work: [`SparsePoints::sample_later`] does not.
    pub fn sample<E: Executor, T: Element + Into<f64>>(
        &self,
        exec: &E,
        field: &E::Field<T, D>,
    ) -> Result<Vec<f64>, LaunchError> {
        self.sample_later(exec, field)?.wait()
    }

    /// [`SparsePoints::sample`] issued with the executor's work, without waiting for it
    /// ([`Executor::read_ranges_later`]): [`Samples::wait`] gives the values `field` held when
    /// this was called, whatever later work writes, with the same bits as `sample`. A model
    /// that records receivers every step keeps a few steps' samples in flight, so the host
    /// issues the next steps while a GPU works.
    pub fn sample_later<E: Executor, T: Element + Into<f64>>(
        &self,
        exec: &E,
        field: &E::Field<T, D>,
    ) -> Result<Samples<T, D>, LaunchError> {
        let total: usize = self.nodes.iter().map(Vec::len).sum();
        let per_point = self.bounding_box().points() > 4 * total;
        let boxes: Vec<Loop<D>> = if self.nodes.is_empty() {
            Vec::new()
        } else if per_point {
            self.nodes.iter().map(|nodes| self.cell_of(nodes)).collect()
        } else {
            vec![self.bounding_box()]
        };
        let readback = exec.read_ranges_later(field, &boxes)?;
        Ok(Samples { nodes: self.nodes.clone(), boxes, per_point, readback })
    }

    /// The box of one point's nodes.
    fn cell_of(&self, nodes: &[([usize; D], f64)]) -> Loop<D> {
        let (mut lo, mut hi) = ([usize::MAX; D], [0; D]);
        for (node, _) in nodes {
            for a in 0..D {
                (lo[a], hi[a]) = (lo[a].min(node[a]), hi[a].max(node[a] + 1));
            }
        }
        Loop::within(self.extent, lo, hi)
    }
}

/// The storage offsets of `points` in a field of `shape`, for [`Executor::add_at`]: an error
/// names a point outside the interior, or a count of values other than the points'.
pub(crate) fn add_offsets<const D: usize>(
    shape: &crate::Shape<D>,
    points: &[[usize; D]],
    values: usize,
) -> Result<Vec<usize>, SparseError> {
    if points.len() != values {
        return Err(SparseError::Values { points: points.len(), values });
    }
    let (h, n) = (shape.halo_widths(), shape.interior());
    let outside = |node: &[usize; D]| (0..D).any(|a| node[a] < h[a] || node[a] >= h[a] + n[a]);
    if let Some((point, node)) = points.iter().enumerate().find(|(_, node)| outside(node)) {
        let region = format!("the interior of a field of {}", shape.describe());
        return Err(SparseError::NodeOutside { point, node: node.to_vec(), region });
    }
    Ok(points.iter().map(|&node| shape.offset(node)).collect())
}

/// The values of [`SparsePoints::sample_later`] in flight: [`Samples::wait`] interpolates them.
#[must_use = "Samples hold their values until `wait` is called"]
#[derive(Debug)]
pub struct Samples<T: Element, const D: usize> {
    nodes: Arc<[PointNodes<D>]>,
    /// The boxes read: the points' bounding box, or one box per point (`per_point`).
    boxes: Vec<Loop<D>>,
    per_point: bool,
    readback: Readback<T>,
}

impl<T: Element + Into<f64>, const D: usize> Samples<T, D> {
    /// Waits for the read and returns every point's value, as [`SparsePoints::sample`] does.
    pub fn wait(self) -> Result<Vec<f64>, LaunchError> {
        let values = self.readback.wait()?;
        if let (false, [whole], [values]) = (self.per_point, &self.boxes[..], &values[..]) {
            return Ok(self.nodes.iter().map(|nodes| interpolate(nodes, whole.begin(), whole, values)).collect());
        }
        Ok(self
            .nodes
            .iter()
            .zip(self.boxes.iter().zip(&values))
            .map(|(nodes, (cell, values))| interpolate(nodes, cell.begin(), cell, values))
            .collect())
    }
}

/// A point's value from the values of the box `within` (axis 0 fastest, first point `lo`) that
/// holds its nodes: the node's value for one node, else the weighted sum in the nodes' order.
fn interpolate<T: Element + Into<f64>, const D: usize>(
    nodes: &[([usize; D], f64)],
    lo: [usize; D],
    within: &Loop<D>,
    values: &[T],
) -> f64 {
    let len = within.len_per_axis();
    let at = |node: &[usize; D]| (0..D).rev().fold(0, |offset, a| offset * len[a] + (node[a] - lo[a]));
    match nodes {
        [(node, _)] => values[at(node)].into(),
        _ => nodes.iter().map(|(node, w)| w * values[at(node)].into()).sum(),
    }
}

/// The nodes of a cell from its per-axis nodes and weights: every combination, axis 0 fastest,
/// with the product of the weights taken in axis order.
fn outer_product<const D: usize>(per_axis: &[Vec<(usize, f64)>; D]) -> Vec<([usize; D], f64)> {
    let total: usize = per_axis.iter().map(Vec::len).product();
    (0..total)
        .map(|mut index| {
            let (mut node, mut weight) = ([0; D], 1.0);
            for (a, choices) in per_axis.iter().enumerate() {
                let (i, w) = choices[index % choices.len()];
                index /= choices.len();
                node[a] = i;
                weight = if a == 0 { w } else { weight * w };
            }
            (node, weight)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Field3, Host, Loop3D, Shape3};

    /// A small deterministic generator (splitmix64) for random positions and values.
    fn random(state: &mut u64) -> f64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The region: interior 10 × 7 × 5 with a layer of 2 cut off each side, halo 1.
    fn setup() -> (Shape3, Loop3D) {
        let shape = Shape3::new([10, 7, 5]).halo(1);
        (shape, Loop3D::interior(&shape).shrink([2, 2, 1]))
    }

    #[test]
    fn points_spread_out_are_read_point_by_point_with_the_same_bits() {
        let shape = Shape3::new([40, 30, 20]).halo(1);
        let region = Loop3D::interior(&shape);
        let mut seed = 11;
        let field = Field3::from_fn(shape, |_| random(&mut seed));
        let h = [1.0; 3];
        // Two points in opposite corners: their box is most of the grid (the spread-out path).
        let positions = [[1.3, 2.6, 0.4], [37.5, 27.25, 18.8]];
        let points = SparsePoints::new(&region, h, &positions).unwrap();
        assert!(points.bounding_box().points() > 4 * 16, "the test must take the point-by-point path");
        let sampled = points.sample(&Host, &field).unwrap();
        for (p, x) in positions.iter().enumerate() {
            // Each point alone: its box holds only its nodes (the one-read path).
            let alone = SparsePoints::new(&region, h, &[*x]).unwrap();
            assert!(alone.bounding_box().points() <= 4 * alone.nodes(0).len());
            assert_eq!(sampled[p].to_bits(), alone.sample(&Host, &field).unwrap()[0].to_bits(), "point {p}");
        }
    }

    #[test]
    fn sample_is_the_trilinear_interpolation_of_an_independent_formula() {
        let (shape, region) = setup();
        let mut seed = 7;
        let field = Field3::from_fn(shape, |_| random(&mut seed));
        let h = [0.5, 2.0, 1.5];
        let len = region.len_per_axis();
        let positions: Vec<[f64; 3]> =
            (0..20).map(|_| std::array::from_fn(|a| random(&mut seed) * (len[a] - 1) as f64 * h[a])).collect();
        let points = SparsePoints::new(&region, h, &positions).unwrap();
        let sampled = points.sample(&Host, &field).unwrap();
        let begin = region.begin();
        for (p, x) in positions.iter().enumerate() {
            // f(x) = Σ over the 8 corners of Π (1 - |x_a - corner_a|), in storage coordinates.
            let g: [f64; 3] = std::array::from_fn(|a| begin[a] as f64 + x[a] / h[a]);
            let base = g.map(|v| v.floor() as usize);
            let mut expected = 0.0;
            for corner in 0..8 {
                let node: [usize; 3] = std::array::from_fn(|a| base[a] + (corner >> a & 1));
                let w: f64 = (0..3).map(|a| (1.0 - (g[a] - node[a] as f64).abs()).max(0.0)).product();
                if w > 0.0 {
                    let s = node.map(|v| v as isize - 1);
                    expected += w * field.get(s).unwrap();
                }
            }
            assert!((sampled[p] - expected).abs() <= 1e-12, "point {p}: {} against {expected}", sampled[p]);
            let weights: f64 = points.nodes(p).iter().map(|(_, w)| w).sum();
            assert!((weights - 1.0).abs() <= 1e-12);
        }
    }

    #[test]
    fn points_on_nodes_read_and_spread_exactly() {
        let (shape, region) = setup();
        let mut seed = 3;
        let field = Field3::from_fn(shape, |_| random(&mut seed));
        let begin = region.begin();
        // The region's first and last node, and one inside: weight 1, the exact value.
        let nodes = [begin, [begin[0] + 5, begin[1] + 2, begin[2] + 2], [begin[0] + 5, begin[1] + 2, begin[2] + 2]];
        let at = [[0.0; 3], [5.0, 2.0, 2.0], [5.0, 2.0, 2.0]];
        for points in
            [SparsePoints::new(&region, [1.0; 3], &at).unwrap(), SparsePoints::on_nodes(&region, &nodes).unwrap()]
        {
            let sampled = points.sample(&Host, &field).unwrap();
            for (p, node) in nodes.iter().enumerate() {
                assert_eq!(sampled[p], field.get(node.map(|v| v as isize - 1)).unwrap());
                let spread: Vec<_> = points.spread(p, 0.3).collect();
                assert_eq!(spread.len(), 1);
                assert_eq!((spread[0].0.begin(), spread[0].0.points(), spread[0].1), (*node, 1, 0.3));
            }
        }
    }

    #[test]
    fn points_outside_the_region_are_refused_by_index() {
        let (_, region) = setup();
        let len = region.len_per_axis();
        let beyond = (len[1] - 1) as f64 + 0.01;
        let err = SparsePoints::new(&region, [1.0; 3], &[[1.0; 3], [0.0, beyond, 0.0]]).unwrap_err();
        assert!(matches!(&err, SparseError::Outside { point: 1, axis: 1, position, .. } if position[1] == beyond));
        assert!(err.to_string().contains("sparse point 1") && err.to_string().contains("axis 1"), "{err}");
        let err = SparsePoints::new(&region, [1.0; 3], &[[f64::NAN, 0.0, 0.0]]).unwrap_err();
        assert!(matches!(err, SparseError::Outside { point: 0, axis: 0, .. }), "{err:?}");
        assert!(err.to_string().contains("sparse point 0"), "{err}");
        // Positions compare bit for bit: the error equals itself, NaN and all.
        assert_eq!(err, err.clone());
        let err = SparsePoints::on_nodes(&region, &[[0, 0, 0]]).unwrap_err();
        assert!(matches!(&err, SparseError::NodeOutside { point: 0, node, .. } if node == &[0, 0, 0]), "{err:?}");
        assert!(err.to_string().contains("sparse point 0"), "{err}");
        let err = SparsePoints::new(&region, [0.0, 1.0, 1.0], &[]).unwrap_err();
        assert!(matches!(err, SparseError::Region { axis: 0, spacing: 0.0, .. }), "{err:?}");
        // Into the crate's error: a range error (S0108) whose source is the sparse one.
        let lifted = LaunchError::from(err.clone());
        assert_eq!(lifted, LaunchError::Range(err.clone().into()));
        assert_eq!(lifted.code(), "S0108");
    }
}
