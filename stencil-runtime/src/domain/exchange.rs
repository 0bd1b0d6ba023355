//! [`Domains`]: one executor per subdomain and the halo exchange between them (ASUCA's
//! `BoundaryExchange`, in one process).
//!
//! The exchange goes axis by axis. Along axis `a`, each subdomain's two halo slabs of that axis
//! are copied from the facing interior layers of its neighbours, over the whole extent of the
//! other axes, halos included. Halos of earlier axes are already right by then, so edges and
//! corners arrive through them (a 27-point or diagonal stencil reads correct values); halos of
//! later axes are overwritten when their axis comes. Sides on the physical boundary are left
//! alone: they hold the model's boundary condition (`fill_halos` on the subdomains that touch
//! it). Each copy is one box copy of the executor: a strided loop on the host, one 3D peer copy
//! between GPUs (stream-ordered after the kernels that wrote either field, and before the ones
//! that follow).

use super::decomposition::{Decomposition, Neighbour};
use crate::executor::{Executor, SideJob};
use crate::field::{Element, HaloFill};
use crate::launch::LaunchError;

/// One field of every subdomain (in subdomain order) and the fill of each axis at the physical
/// boundary, for [`Domains::fill_boundary`].
pub type BoundarySet<'a, F, const D: usize> = (&'a mut [F], [Option<HaloFill>; D]);

/// A decomposition with the executor of every subdomain (`execs[i]` runs subdomain `i`: all
/// `Host`, or one `Gpu` per subdomain, several subdomains may share a GPU).
#[derive(Clone, Debug)]
pub struct Domains<E: Executor, const D: usize> {
    decomposition: Decomposition<D>,
    execs: Vec<E>,
}

impl<E: Executor, const D: usize> Domains<E, D> {
    /// The subdomains of `decomposition` on `execs`, one per subdomain.
    pub fn new(decomposition: Decomposition<D>, execs: Vec<E>) -> Result<Self, LaunchError> {
        if execs.len() != decomposition.len() {
            return Err(LaunchError::Decomposition(format!(
                "{} executors for the {} subdomains of process grid {:?}: give one executor per subdomain",
                execs.len(),
                decomposition.len(),
                decomposition.grid()
            )));
        }
        Ok(Domains { decomposition, execs })
    }

    /// The decomposition.
    pub fn decomposition(&self) -> &Decomposition<D> {
        &self.decomposition
    }

    /// The executor of subdomain `i` (panics if `i` is not below the number of subdomains, as
    /// indexing a slice does).
    pub fn exec(&self, i: usize) -> &E {
        &self.execs[i]
    }

    /// Every subdomain's executor, in subdomain order.
    pub fn execs(&self) -> &[E] {
        &self.execs
    }

    /// Fills the halo of `fields[i]` (the field of subdomain `i`) from the neighbours'
    /// interiors, the depth of each axis being the fields' halo there (see the module docs).
    /// The fields must have the shapes of their subdomains, with one halo width per axis.
    pub fn exchange<T: Element>(&self, fields: &mut [E::Field<T, D>]) -> Result<(), LaunchError> {
        let d = &self.decomposition;
        if fields.len() != d.len() {
            return Err(LaunchError::Decomposition(format!(
                "exchange of {} fields over {} subdomains: pass one field per subdomain, in subdomain order",
                fields.len(),
                d.len()
            )));
        }
        let halo = self.execs[0].shape_of(&fields[0]).halo_widths();
        for (s, field) in d.subdomains().zip(fields.iter()) {
            let shape = self.execs[s.index].shape_of(field);
            if shape.interior() != s.extent || shape.halo_widths() != halo {
                return Err(LaunchError::Decomposition(format!(
                    "exchange: the field of subdomain {} has {}, but the subdomain is {:?} points and the \
                     fields' halo is {halo:?}: allocate each field with `Subdomain::shape`",
                    s.index,
                    shape.describe(),
                    s.extent
                )));
            }
        }
        for axis in 0..D {
            let h = halo[axis];
            if h == 0 {
                continue;
            }
            for s in d.subdomains() {
                for side in [-1i8, 1] {
                    let mut dir = [0i8; D];
                    dir[axis] = side;
                    let Neighbour::Domain(j) = d.neighbour(&s, dir) else { continue };
                    let n = d.subdomain(j);
                    if n.extent[axis] < h {
                        return Err(LaunchError::Decomposition(format!(
                            "exchange: subdomain {j} has {} points along axis {axis}, fewer than the halo of {h}: \
                             use fewer subdomains along that axis or a narrower halo",
                            n.extent[axis]
                        )));
                    }
                    let ext = self.execs[s.index].shape_of(&fields[s.index]).extent();
                    let src_ext = self.execs[j].shape_of(&fields[j]).extent();
                    // The box: along `axis`, h layers; along the others, the whole extent.
                    let mut len = ext;
                    len[axis] = h;
                    let (mut dst_at, mut src_at) = ([0usize; D], [0usize; D]);
                    if side < 0 {
                        // Low halo [0, h) from the neighbour's last interior layers.
                        src_at[axis] = src_ext[axis] - 2 * h;
                    } else {
                        dst_at[axis] = ext[axis] - h;
                        src_at[axis] = h;
                    }
                    self.copy(fields, s.index, dst_at, j, src_at, len)?;
                }
            }
        }
        Ok(())
    }

    /// Fills the physical-boundary sides of every subdomain's fields: each set holds one field
    /// per subdomain (in subdomain order) and the fill of each axis; only the sides of a
    /// subdomain that lie on the physical boundary are filled (the others are the exchange's),
    /// all sets of a subdomain in one executor call. With the exchange before it, the halos are
    /// what the single-domain run's `fill_halos` gives: call `exchange` first, then this.
    pub fn fill_boundary<T: Element>(
        &self,
        sets: &mut [BoundarySet<'_, E::Field<T, D>, D>],
    ) -> Result<(), LaunchError> {
        let d = &self.decomposition;
        if let Some((fields, _)) = sets.iter().find(|(f, _)| f.len() != d.len()) {
            return Err(LaunchError::Decomposition(format!(
                "fill_boundary: a set of {} fields over {} subdomains: pass one field per subdomain",
                fields.len(),
                d.len()
            )));
        }
        for (_, fills) in sets.iter() {
            d.check_boundary_fills(fills).map_err(LaunchError::Decomposition)?;
        }
        for s in d.subdomains() {
            let sides: [[bool; 2]; D] = std::array::from_fn(|a| {
                [-1i8, 1].map(|side| {
                    let mut dir = [0i8; D];
                    dir[a] = side;
                    d.neighbour(&s, dir) == Neighbour::Boundary
                })
            });
            let mut jobs: Vec<SideJob<'_, E::Field<T, D>, D>> = sets
                .iter_mut()
                .map(|(fields, fills)| {
                    let per_side = std::array::from_fn(|a| sides[a].map(|on| if on { fills[a] } else { None }));
                    (&mut fields[s.index], per_side)
                })
                .collect();
            self.execs[s.index].fill_halo_sides(&mut jobs)?;
        }
        Ok(())
    }

    /// Copies a box from field `src` to field `dst` (possibly the same field).
    fn copy<T: Element>(
        &self,
        fields: &mut [E::Field<T, D>],
        dst: usize,
        dst_at: [usize; D],
        src: usize,
        src_at: [usize; D],
        len: [usize; D],
    ) -> Result<(), LaunchError> {
        let exec = &self.execs[dst];
        if dst == src {
            return exec.copy_box(&mut fields[dst], dst_at, None, src_at, len);
        }
        let (d, s) = if dst < src {
            let (lo, hi) = fields.split_at_mut(src);
            (&mut lo[dst], &hi[0])
        } else {
            let (lo, hi) = fields.split_at_mut(dst);
            (&mut hi[0], &lo[src])
        };
        exec.copy_box(d, dst_at, Some((&self.execs[src], s)), src_at, len)
    }
}
