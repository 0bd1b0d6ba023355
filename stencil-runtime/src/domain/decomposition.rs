//! [`Decomposition`]: a global grid split over a process grid of subdomains (ASUCA's
//! `DomainManager`), with uneven splits, periodic axes and the neighbours of every subdomain.

use crate::field::{Element, Field, FieldError, Shape};
use std::fmt;

/// What is on the other side of a subdomain's face, edge or corner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Neighbour {
    /// Another subdomain (its index in the decomposition; with a periodic axis it may be the
    /// subdomain itself).
    Domain(usize),
    /// The physical boundary: the halo there is the model's boundary condition.
    Boundary,
}

/// One subdomain: where it sits in the process grid and in the global grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Subdomain<const D: usize> {
    /// Its index in [`Decomposition::subdomains`] (axis 0 of the process grid fastest).
    pub index: usize,
    /// Its coordinates in the process grid.
    pub coords: [usize; D],
    /// The global coordinate of its first interior point.
    pub offset: [usize; D],
    /// Its interior extent.
    pub extent: [usize; D],
}

impl<const D: usize> Subdomain<D> {
    /// The global coordinate of a local one (both relative to the first interior point; halo
    /// points are negative or `>= extent` locally).
    pub fn to_global(&self, local: [isize; D]) -> [isize; D] {
        std::array::from_fn(|a| local[a] + self.offset[a] as isize)
    }

    /// The local coordinate of a global one.
    pub fn to_local(&self, global: [isize; D]) -> [isize; D] {
        std::array::from_fn(|a| global[a] - self.offset[a] as isize)
    }

    /// Whether a global coordinate is in this subdomain's interior.
    pub fn owns(&self, global: [isize; D]) -> bool {
        let local = self.to_local(global);
        (0..D).all(|a| local[a] >= 0 && (local[a] as usize) < self.extent[a])
    }

    /// This subdomain's shape for fields with `halo` per axis, in `like`'s order and alignment.
    pub fn shape(&self, like: &Shape<D>) -> Shape<D> {
        like.with_interior(self.extent)
    }

    /// This subdomain's field cut from a global host field (of [`Subdomain::shape`] of its
    /// shape): the interior, and the halo points that lie inside the global field.
    pub fn part_of<T: Element>(&self, global: &Field<T, D>) -> Field<T, D> {
        self.try_part_of(global).expect("a box inside both fields")
    }

    /// [`Subdomain::part_of`], or the error of allocating it. Both fields have the same halo,
    /// so storage point `p` of the part is storage point `p + offset` of the global field: one
    /// box copied row by row.
    pub(crate) fn try_part_of<T: Element>(&self, global: &Field<T, D>) -> Result<Field<T, D>, FieldError> {
        let mut part = Field::try_zeros(self.shape(global.shape()))?;
        let (inside, whole) = (part.shape().extent(), global.shape().extent());
        let len: [usize; D] = std::array::from_fn(|a| inside[a].min(whole[a].saturating_sub(self.offset[a])));
        if len.iter().all(|&n| n > 0) {
            let values = global.read_box(self.offset, len)?;
            part.write_box([0; D], len, &values)?;
        }
        Ok(part)
    }
}

/// Why a decomposition cannot be built.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecompositionError {
    /// The process grid has an axis of 0 domains, or more domains than points along an axis.
    Grid {
        /// The global extent.
        global: Vec<usize>,
        /// The process grid asked for.
        grid: Vec<usize>,
        /// The axis at fault.
        axis: usize,
    },
    /// A subdomain would be thinner than the halo along an axis, so a halo would need points of
    /// a subdomain beyond the neighbour.
    ThinnerThanHalo {
        /// The axis.
        axis: usize,
        /// The thinnest subdomain's extent there.
        extent: usize,
        /// The halo width there.
        halo: usize,
        /// The process grid.
        grid: Vec<usize>,
    },
    /// A process grid given together with a number of domains it does not have.
    GridCount {
        /// The process grid given.
        grid: Vec<usize>,
        /// The domains asked for.
        domains: usize,
    },
    /// A block of subdomains ([`Decomposition::in_blocks`]) that does not tile the process grid.
    Block {
        /// The process grid.
        grid: Vec<usize>,
        /// The block asked for.
        block: Vec<usize>,
        /// The axis at fault.
        axis: usize,
    },
    /// No process grid of `domains` domains fits the extent and halo.
    NoGrid {
        /// Domains asked for.
        domains: usize,
        /// The global extent.
        global: Vec<usize>,
    },
}

impl fmt::Display for DecompositionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecompositionError::Grid { global, grid, axis } => write!(
                f,
                "process grid {grid:?} does not fit the global extent {global:?} along axis {axis}: each axis needs \
                 1 to {} domains; choose a grid whose axes divide the extent into non-empty parts",
                global[*axis]
            ),
            DecompositionError::ThinnerThanHalo { axis, extent, halo, grid } => write!(
                f,
                "process grid {grid:?} leaves subdomains of {extent} points along axis {axis}, thinner than the halo \
                 of {halo} there: use fewer domains along that axis (a halo must come from the neighbour alone)"
            ),
            DecompositionError::GridCount { grid, domains } => write!(
                f,
                "process grid {grid:?} has {} subdomains, not the {domains} asked for: give a grid whose product is \
                 {domains}, or no grid (the one of least halo surface is chosen)",
                grid.iter().product::<usize>()
            ),
            DecompositionError::Block { grid, block, axis } => write!(
                f,
                "a block of {block:?} subdomains does not tile the process grid {grid:?} along axis {axis}: each \
                 axis of the block must divide the grid's (1 up to {})",
                grid[*axis]
            ),
            DecompositionError::NoGrid { domains: 0, .. } => write!(f, "0 subdomains: run on at least one"),
            DecompositionError::NoGrid { domains, global } => write!(
                f,
                "no process grid of {domains} domains fits the global extent {global:?} with the halo asked for; \
                 use fewer domains"
            ),
        }
    }
}

impl std::error::Error for DecompositionError {}

/// A boundary fill that a subdomain cannot apply from its own interior
/// ([`Decomposition::check_boundary_fills`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BoundaryFillError {
    /// `Periodic` along an axis the decomposition already wraps: the exchange fills that halo.
    PeriodicOnWrappedAxis {
        /// The axis.
        axis: usize,
    },
    /// `Periodic` along an axis split over several subdomains and not periodic in the
    /// decomposition: the values are on the other end of the grid.
    PeriodicOnSplitAxis {
        /// The axis.
        axis: usize,
        /// Its subdomains.
        parts: usize,
    },
}

impl fmt::Display for BoundaryFillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoundaryFillError::PeriodicOnWrappedAxis { axis } => write!(
                f,
                "a Periodic boundary fill along axis {axis}, which the Decomposition already makes periodic: the \
                 exchange fills its halo from the other end; give that axis no boundary fill (None)"
            ),
            BoundaryFillError::PeriodicOnSplitAxis { axis, parts } => write!(
                f,
                "a Periodic boundary fill along axis {axis}, which is split over {parts} subdomains: declare the axis \
                 periodic in the Decomposition (the exchange then wraps it) and give it no boundary fill"
            ),
        }
    }
}

impl std::error::Error for BoundaryFillError {}

/// A global grid of `global` interior points split over a process grid `grid`, with
/// `periodic` axes wrapping around. Along an axis of `n` points and `p` domains, the first
/// `n % p` domains get one point more than the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decomposition<const D: usize> {
    global: [usize; D],
    grid: [usize; D],
    periodic: [bool; D],
    /// Subdomains are numbered block by block ([`Decomposition::in_blocks`]); `[1; D]`: axis 0
    /// of the process grid fastest.
    block: [usize; D],
}

impl<const D: usize> Decomposition<D> {
    /// The decomposition over process grid `grid`, checked against the global extent and the
    /// halo widths the fields will have (every subdomain at least as thick as the halo).
    pub fn new(
        global: [usize; D],
        grid: [usize; D],
        periodic: [bool; D],
        halo: [usize; D],
    ) -> Result<Self, DecompositionError> {
        for a in 0..D {
            if grid[a] == 0 || grid[a] > global[a] {
                return Err(DecompositionError::Grid { global: global.to_vec(), grid: grid.to_vec(), axis: a });
            }
            let thinnest = global[a] / grid[a];
            // One domain on a non-periodic axis has no neighbour to take a halo from.
            let exchanges = grid[a] > 1 || periodic[a];
            if exchanges && thinnest < halo[a] {
                return Err(DecompositionError::ThinnerThanHalo {
                    axis: a,
                    extent: thinnest,
                    halo: halo[a],
                    grid: grid.to_vec(),
                });
            }
        }
        Ok(Decomposition { global, grid, periodic, block: [1; D] })
    }

    /// This decomposition with its subdomains numbered block by block: the subdomains of one
    /// `block` of the process grid take consecutive indices (axis 0 fastest within a block, and
    /// the blocks in the same order), so that ranks numbered one node after the other, and the
    /// subdomains of one process, hold a compact block and exchange more of their halos within
    /// it. Each axis of `block` must divide the grid's. Where each subdomain lies, and every
    /// result, stay the same; only the numbering (and so which rank holds which subdomain)
    /// changes.
    pub fn in_blocks(self, block: [usize; D]) -> Result<Self, DecompositionError> {
        if let Some(axis) = (0..D).find(|&a| block[a] == 0 || !self.grid[a].is_multiple_of(block[a])) {
            return Err(DecompositionError::Block { grid: self.grid.to_vec(), block: block.to_vec(), axis });
        }
        Ok(Decomposition { block, ..self })
    }

    /// This decomposition numbered in blocks of `count` subdomains (a node's, or a process's;
    /// [`Decomposition::in_blocks`]): of the blocks of `count` subdomains that tile the process
    /// grid, the one whose subdomains send the fewest halo points out of it (faces between
    /// blocks). Unchanged where no block of `count` tiles the grid.
    pub fn in_blocks_of(self, count: usize) -> Self {
        let extent = self.subdomain(0).extent;
        let leaving = |b: &[usize; D]| -> usize {
            (0..D)
                .filter(|&a| self.grid[a] > b[a])
                .map(|a| 2 * (0..D).filter(|&c| c != a).map(|c| b[c] * extent[c]).product::<usize>())
                .sum()
        };
        factorisations::<D>(count.max(1))
            .into_iter()
            .filter(|b| (0..D).all(|a| self.grid[a].is_multiple_of(b[a])))
            .min_by_key(leaving)
            .and_then(|b| self.in_blocks(b).ok())
            .unwrap_or(self)
    }

    /// The decomposition over `domains` domains: over process grid `grid` when one is given (its
    /// product must be `domains`; [`Decomposition::new`]), else the grid of least halo surface
    /// ([`Decomposition::auto`]). What a `--domains N --grid PX,PY,PZ` option turns into.
    pub fn with_grid(
        global: [usize; D],
        domains: usize,
        grid: Option<[usize; D]>,
        periodic: [bool; D],
        halo: [usize; D],
    ) -> Result<Self, DecompositionError> {
        match grid {
            _ if domains == 0 => Err(DecompositionError::NoGrid { domains, global: global.to_vec() }),
            Some(g) if g.iter().product::<usize>() != domains => {
                Err(DecompositionError::GridCount { grid: g.to_vec(), domains })
            }
            Some(g) => Self::new(global, g, periodic, halo),
            None => Self::auto(global, domains, periodic, halo),
        }
    }

    /// The decomposition over `domains` domains whose process grid has the least halo surface
    /// (the sum over subdomains of their halo points), among the grids that fit.
    pub fn auto(
        global: [usize; D],
        domains: usize,
        periodic: [bool; D],
        halo: [usize; D],
    ) -> Result<Self, DecompositionError> {
        let mut best: Option<(usize, Self)> = None;
        for grid in factorisations::<D>(domains) {
            let Ok(d) = Self::new(global, grid, periodic, halo) else { continue };
            let surface: usize = d.subdomains().map(|s| halo_points(s.extent, halo)).sum();
            if best.as_ref().is_none_or(|(b, _)| surface < *b) {
                best = Some((surface, d));
            }
        }
        best.map(|(_, d)| d).ok_or(DecompositionError::NoGrid { domains, global: global.to_vec() })
    }

    /// The global interior extent.
    pub fn global(&self) -> [usize; D] {
        self.global
    }

    /// The process grid.
    pub fn grid(&self) -> [usize; D] {
        self.grid
    }

    /// Which axes wrap around.
    pub fn periodic(&self) -> [bool; D] {
        self.periodic
    }

    /// The block of subdomains numbered together ([`Decomposition::in_blocks`]).
    pub fn block(&self) -> [usize; D] {
        self.block
    }

    /// Number of subdomains.
    pub fn len(&self) -> usize {
        self.grid.iter().product()
    }

    /// Whether there are no subdomains (never: a decomposition has at least one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Start and extent of part `c` of `p` along `n` points.
    fn split(n: usize, p: usize, c: usize) -> (usize, usize) {
        let (base, extra) = (n / p, n % p);
        (c * base + c.min(extra), base + usize::from(c < extra))
    }

    /// The subdomain at process-grid coordinates `coords`.
    pub fn at(&self, coords: [usize; D]) -> Subdomain<D> {
        let parts: [(usize, usize); D] = std::array::from_fn(|a| Self::split(self.global[a], self.grid[a], coords[a]));
        let (mut block, mut within) = (0, 0);
        for a in (0..D).rev() {
            block = block * (self.grid[a] / self.block[a]) + coords[a] / self.block[a];
            within = within * self.block[a] + coords[a] % self.block[a];
        }
        let index = block * self.block.iter().product::<usize>() + within;
        Subdomain { index, coords, offset: parts.map(|p| p.0), extent: parts.map(|p| p.1) }
    }

    /// Subdomain `index` (axis 0 of the process grid fastest, block by block: [`Decomposition::in_blocks`]).
    pub fn subdomain(&self, index: usize) -> Subdomain<D> {
        let size: usize = self.block.iter().product();
        let (mut block, mut within) = (index / size, index % size);
        self.at(std::array::from_fn(|a| {
            let blocks = self.grid[a] / self.block[a];
            let c = (block % blocks) * self.block[a] + within % self.block[a];
            (block, within) = (block / blocks, within / self.block[a]);
            c
        }))
    }

    /// Every subdomain, in index order.
    pub fn subdomains(&self) -> impl Iterator<Item = Subdomain<D>> + '_ {
        (0..self.len()).map(|i| self.subdomain(i))
    }

    /// The neighbour of `s` in direction `dir` (each component -1, 0 or 1; faces, edges and
    /// corners: `3^D - 1` directions).
    pub fn neighbour(&self, s: &Subdomain<D>, dir: [i8; D]) -> Neighbour {
        let mut coords = s.coords;
        for a in 0..D {
            let c = s.coords[a] as isize + dir[a] as isize;
            let p = self.grid[a] as isize;
            coords[a] = if (0..p).contains(&c) {
                c as usize
            } else if self.periodic[a] {
                c.rem_euclid(p) as usize
            } else {
                return Neighbour::Boundary;
            };
        }
        Neighbour::Domain(self.at(coords).index)
    }

    /// Refuses boundary fills that a subdomain cannot apply from its own interior: `Periodic` on
    /// an axis split over several subdomains (its values are on the other end of the grid; make
    /// the axis periodic in the decomposition instead, and the exchange wraps it).
    pub fn check_boundary_fills(&self, fills: &[Option<crate::field::HaloFill>; D]) -> Result<(), BoundaryFillError> {
        let Some(a) = (0..D).find(|&a| fills[a] == Some(crate::field::HaloFill::Periodic) && self.grid[a] > 1) else {
            return Ok(());
        };
        if self.periodic[a] {
            return Err(BoundaryFillError::PeriodicOnWrappedAxis { axis: a });
        }
        Err(BoundaryFillError::PeriodicOnSplitAxis { axis: a, parts: self.grid[a] })
    }

    /// The subdomain owning a global interior coordinate, if it is inside the grid.
    pub fn owner(&self, global: [isize; D]) -> Option<Subdomain<D>> {
        let coords: Option<Vec<usize>> = (0..D)
            .map(|a| {
                let g = usize::try_from(global[a]).ok().filter(|&g| g < self.global[a])?;
                (0..self.grid[a]).find(|&c| {
                    let (start, len) = Self::split(self.global[a], self.grid[a], c);
                    (start..start + len).contains(&g)
                })
            })
            .collect();
        coords.map(|c| self.at(std::array::from_fn(|a| c[a])))
    }

    /// The fields of every subdomain cut from a global host field (`like` gives the halo, order
    /// and alignment; interior values are copied, halos of the subdomain fields that lie inside
    /// the global field too, so a global halo fill carries over).
    pub fn scatter<T: Element>(&self, global: &Field<T, D>) -> Vec<Field<T, D>> {
        self.subdomains().map(|s| s.part_of(global)).collect()
    }

    /// The global host field of shape `like` (its interior must be the global extent) with the
    /// interiors of the subdomain fields (in subdomain order); the global halo is zero.
    pub fn gather<T: Element>(&self, like: &Shape<D>, parts: &[Field<T, D>]) -> Field<T, D> {
        Field::from_fn(*like, |g| {
            self.owner(g).and_then(|s| parts.get(s.index)?.get(s.to_local(g))).unwrap_or_default()
        })
    }
}

/// Halo points of a subdomain of `extent` with `halo` per axis.
fn halo_points<const D: usize>(extent: [usize; D], halo: [usize; D]) -> usize {
    let with: usize = (0..D).map(|a| extent[a] + 2 * halo[a]).product();
    with - extent.iter().product::<usize>()
}

/// Every way to write `n` as an ordered product of `D` factors.
fn factorisations<const D: usize>(n: usize) -> Vec<[usize; D]> {
    let mut out = vec![[1usize; D]];
    for a in 0..D {
        out = out
            .into_iter()
            .flat_map(|g| {
                let used: usize = g.iter().product();
                let left = n / used;
                (1..=left).filter(move |f| left.is_multiple_of(*f)).map(move |f| {
                    let mut g = g;
                    g[a] = f;
                    g
                })
            })
            .filter(|g| a + 1 < D || g.iter().product::<usize>() == n)
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_holds_the_global_values_of_its_points_and_zero_beyond_the_global_field() {
        use crate::field::Order;
        for order in [Order::Ijk, Order::Kij] {
            let like = Shape::new([10, 7, 8]).halo_per_axis([2, 1, 3]).order(order);
            let global = Field::from_fn(like, |g| 1.0 + (g[0] * 100 + g[1] * 10 + g[2]) as f64);
            let d = Decomposition::new([10, 7, 8], [3, 2, 2], [true, false, false], [2, 1, 3]).unwrap();
            for s in d.subdomains() {
                let part = s.part_of(&global);
                let want = Field::from_fn(s.shape(&like), |l| global.get(s.to_global(l)).unwrap_or_default());
                assert_eq!(part.to_vec(), want.to_vec(), "{order:?} subdomain {}", s.index);
            }
        }
    }

    #[test]
    fn uneven_splits_tile_the_grid_and_neighbours_wrap_where_periodic() {
        let d = Decomposition::new([10, 7, 5], [3, 2, 1], [true, false, false], [1, 1, 1]).unwrap();
        assert_eq!(d.len(), 6);
        let mut count = [[[0; 5]; 7]; 10];
        for s in d.subdomains() {
            for k in 0..s.extent[2] {
                for j in 0..s.extent[1] {
                    for i in 0..s.extent[0] {
                        count[s.offset[0] + i][s.offset[1] + j][s.offset[2] + k] += 1;
                    }
                }
            }
            assert_eq!(d.subdomain(s.index), s);
        }
        assert!(count.iter().flatten().flatten().all(|&c| c == 1));
        assert_eq!(d.subdomain(0).extent, [4, 4, 5]);
        assert_eq!(d.subdomain(2).extent, [3, 4, 5]);
        let first = d.subdomain(0);
        assert_eq!(d.neighbour(&first, [-1, 0, 0]), Neighbour::Domain(2), "x wraps");
        assert_eq!(d.neighbour(&first, [0, -1, 0]), Neighbour::Boundary);
        assert_eq!(d.neighbour(&first, [1, 1, 0]), Neighbour::Domain(4));
        assert_eq!(d.neighbour(&first, [0, 0, 1]), Neighbour::Boundary);
        assert_eq!(d.owner([9, 6, 4]).map(|s| s.index), Some(5));
        assert_eq!(d.owner([10, 0, 0]), None);
    }

    #[test]
    fn blocks_number_their_subdomains_together_and_change_nothing_else() {
        let flat = Decomposition::new([16, 12, 8], [4, 2, 2], [true, false, true], [1, 1, 1]).unwrap();
        let d = flat.in_blocks([2, 2, 2]).unwrap();
        assert_eq!((d.block(), flat.block()), ([2, 2, 2], [1, 1, 1]));
        let mut seen = vec![false; d.len()];
        for s in d.subdomains() {
            // A bijection between indices and process-grid cells, each cell where it was.
            assert!(!std::mem::replace(&mut seen[s.index], true));
            let same = flat.at(s.coords);
            assert_eq!((s.offset, s.extent), (same.offset, same.extent));
            assert_eq!(d.at(s.coords), s);
            // The eight subdomains of a block are consecutive.
            assert_eq!(s.index / 8, s.coords[0] / 2 + 2 * (s.coords[1] / 2 + s.coords[2] / 2), "{s:?}");
            // The same neighbours, under their new numbers.
            for dir in [[1i8, 0, 0], [-1, 1, 0], [0, -1, -1], [1, 1, 1]] {
                let index = |n: Neighbour, of: &Decomposition<3>| match n {
                    Neighbour::Domain(i) => Some(of.subdomain(i).coords),
                    Neighbour::Boundary => None,
                };
                assert_eq!(index(d.neighbour(&s, dir), &d), index(flat.neighbour(&same, dir), &flat));
            }
        }
        assert!(seen.iter().all(|&v| v));
        assert_eq!(d.subdomain(1).coords, [1, 0, 0]);
        assert_eq!(d.subdomain(2).coords, [0, 1, 0]);
        assert_eq!(d.subdomain(8).coords, [2, 0, 0]);
        // Scatter then gather through the blocked numbering is still the identity.
        let like = Shape::new([16, 12, 8]).halo(1);
        let global = Field::<f64, 3>::from_fn(like, |[i, j, k]| (i * 100 + j * 10 + k) as f64);
        let parts = d.scatter(&global);
        assert_eq!(parts[2].get([0, 0, 0]), global.get([0, 6, 0]), "subdomain 2 is the one above 0 along y");
        let back = d.gather(&like, &parts);
        for p in d.subdomains().flat_map(|s| (0..s.extent.iter().product::<usize>()).map(move |n| (s, n))) {
            let (s, n) = p;
            let l = [n % s.extent[0], n / s.extent[0] % s.extent[1], n / (s.extent[0] * s.extent[1])];
            let g = std::array::from_fn(|a| (s.offset[a] + l[a]) as isize);
            assert_eq!(back.get(g), global.get(g));
        }
        // A block that does not tile the grid is refused, naming the axis.
        let e = flat.in_blocks([3, 1, 1]).unwrap_err();
        assert!(matches!(e, DecompositionError::Block { axis: 0, .. }), "{e:?}");
        assert!(e.to_string().contains("does not tile the process grid [4, 2, 2] along axis 0"), "{e}");
        assert!(flat.in_blocks([1, 0, 1]).is_err());
    }

    #[test]
    fn blocks_of_a_count_send_the_fewest_points_out() {
        // 16 x 16 x 16 subdomains of a cube in nodes of 8: a 2 x 2 x 2 block, not a row.
        let d = Decomposition::new([256; 3], [16; 3], [false; 3], [1; 3]).unwrap();
        assert_eq!(d.in_blocks_of(8).block(), [2, 2, 2]);
        // A block of the whole grid numbers as before; no block of 5 tiles a 4 x 4 grid.
        let e = Decomposition::new([8, 8], [4, 4], [false; 2], [1; 2]).unwrap();
        assert_eq!(e.in_blocks_of(16), e.in_blocks([4, 4]).unwrap());
        assert!(e.in_blocks_of(16).subdomains().all(|s| s == e.subdomain(s.index)));
        assert_eq!(e.in_blocks_of(5), e);
        // Along a long thin grid the block stays across the short axes.
        let f = Decomposition::new([64, 8], [8, 2], [false; 2], [1; 2]).unwrap();
        assert_eq!(f.in_blocks_of(4).block(), [2, 2]);
    }

    #[test]
    fn bad_grids_are_refused_and_auto_prefers_less_surface() {
        assert!(matches!(
            Decomposition::new([4, 4], [5, 1], [false; 2], [1, 1]),
            Err(DecompositionError::Grid { axis: 0, .. })
        ));
        assert!(matches!(
            Decomposition::new([4, 4], [0, 1], [false; 2], [1, 1]),
            Err(DecompositionError::Grid { axis: 0, .. })
        ));
        let e = Decomposition::new([8, 8], [1, 4], [false; 2], [1, 3]).unwrap_err();
        assert!(e.to_string().contains("thinner than the halo"), "{e}");
        // One domain along a walled axis needs no halo from a neighbour.
        assert!(Decomposition::new([2, 8], [1, 2], [false; 2], [4, 1]).is_ok());
        let d = Decomposition::auto([64, 64, 8], 4, [false; 3], [1; 3]).unwrap();
        assert_eq!(d.grid(), [2, 2, 1]);
        assert!(Decomposition::auto([2, 2], 16, [false; 2], [1, 1]).is_err());
        assert_eq!(factorisations::<3>(12).len(), 18);
    }

    #[test]
    fn scatter_then_gather_is_the_identity_on_the_interior() {
        let shape = Shape::new([9, 5]).halo(2);
        let f = Field::from_fn(shape, |[i, j]| (i * 100 + j) as f64);
        let d = Decomposition::new([9, 5], [2, 2], [false, true], [2, 2]).unwrap();
        let parts = d.scatter(&f);
        assert_eq!(parts[3].get([-1, -2]), f.get([4, 1]), "a halo inside the global field comes along");
        let back = d.gather(&shape, &parts);
        for j in 0..5 {
            for i in 0..9 {
                assert_eq!(back.get([i, j]), f.get([i, j]));
            }
        }
    }
}
