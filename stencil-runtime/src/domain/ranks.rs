//! [`Ranks`]: one subdomain per MPI rank (cargo feature `mpi`, rsmpi over the system's MPI),
//! with the same exchange as [`Domains`](super::Domains): axis by axis, each halo slab from the
//! facing interior layers of the neighbour, so edges and corners arrive through the earlier
//! axes' halos; physical-boundary sides left to [`Ranks::fill_boundary`].
//!
//! The transport is host-staged: a slab is read into a host buffer ([`Executor::read_box`]: a
//! loop on the host, one 3D copy from a GPU), sent with `MPI_Sendrecv` (or a plain send or
//! receive where one side is a wall), and written into the halo ([`Executor::write_box`]). Along
//! an axis of one periodic subdomain the slab is copied within the rank. Per axis, two phases:
//! low interior slabs travel down while high halos are received, then high slabs travel up.

use super::decomposition::{Decomposition, Neighbour, Subdomain};
use crate::error::LaunchError;
use crate::executor::{Executor, HaloJob, SideJob};
use crate::field::{Element, Field, Shape};
use mpi::collective::SystemOperation;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;

/// This rank's subdomain of a decomposition over the ranks of `world` (rank `r` holds
/// subdomain `r`), on executor `exec`.
pub struct Ranks<E: Executor, const D: usize> {
    world: SimpleCommunicator,
    decomposition: Decomposition<D>,
    exec: E,
}

impl<E: Executor, const D: usize> Ranks<E, D> {
    /// The subdomain of this rank. The decomposition must have one subdomain per rank.
    pub fn new(world: SimpleCommunicator, decomposition: Decomposition<D>, exec: E) -> Result<Self, LaunchError> {
        let size = world.size() as usize;
        if size != decomposition.len() {
            return Err(LaunchError::Decomposition(format!(
                "process grid {:?} has {} subdomains but MPI started {size} ranks: run `mpiexec -n {}` or choose a \
                 grid of {size} subdomains (`Decomposition::auto`)",
                decomposition.grid(),
                decomposition.len(),
                decomposition.len()
            )));
        }
        Ok(Ranks { world, decomposition, exec })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    /// The decomposition.
    pub fn decomposition(&self) -> &Decomposition<D> {
        &self.decomposition
    }

    /// This rank's subdomain.
    pub fn subdomain(&self) -> Subdomain<D> {
        self.decomposition.subdomain(self.rank())
    }

    /// This rank's executor.
    pub fn exec(&self) -> &E {
        &self.exec
    }

    /// The communicator.
    pub fn world(&self) -> &SimpleCommunicator {
        &self.world
    }

    /// Fills the halo of this rank's field from the neighbouring ranks (see the module docs).
    /// Every rank calls it, with fields of the same halo widths.
    pub fn exchange<T: Element>(&self, field: &mut E::Field<T, D>) -> Result<(), LaunchError> {
        let d = &self.decomposition;
        let me = self.subdomain();
        let shape = *self.exec.shape_of(field);
        if shape.interior() != me.extent {
            return Err(LaunchError::Decomposition(format!(
                "exchange on rank {}: the field has {}, but the rank's subdomain is {:?} points: allocate it with \
                 `Subdomain::shape`",
                me.index,
                shape.describe(),
                me.extent
            )));
        }
        let (ext, halo) = (shape.extent(), shape.halo_widths());
        for axis in 0..D {
            let h = halo[axis];
            if h == 0 {
                continue;
            }
            let side = |s: i8| {
                let mut dir = [0i8; D];
                dir[axis] = s;
                d.neighbour(&me, dir)
            };
            let (low, high) = (side(-1), side(1));
            let mut len = ext;
            len[axis] = h;
            let at = |layer: usize| {
                let mut at = [0usize; D];
                at[axis] = layer;
                at
            };
            // Phase 1: my low interior slab down, my high halo from above. Phase 2: the mirror.
            let phases = [(low, at(h), high, at(ext[axis] - h)), (high, at(ext[axis] - 2 * h), low, at(0))];
            for (phase, (to, from_at, from, into_at)) in phases.into_iter().enumerate() {
                let tag = (2 * axis + phase) as i32;
                self.transfer(field, to, from_at, from, into_at, len, tag)?;
            }
        }
        Ok(())
    }

    /// Sends the box at `send_at` to `to` and receives the box at `recv_at` from `from`.
    #[allow(clippy::too_many_arguments)]
    fn transfer<T: Element>(
        &self,
        field: &mut E::Field<T, D>,
        to: Neighbour,
        send_at: [usize; D],
        from: Neighbour,
        recv_at: [usize; D],
        len: [usize; D],
        tag: i32,
    ) -> Result<(), LaunchError> {
        let me = self.rank();
        if to == Neighbour::Domain(me) && from == Neighbour::Domain(me) {
            return self.exec.copy_box(field, recv_at, None, send_at, len);
        }
        let points: usize = len.iter().product();
        let size = std::mem::size_of::<T>();
        let outgoing = match to {
            Neighbour::Domain(_) => {
                let mut bytes = Vec::with_capacity(points * size);
                self.exec.read_box(field, send_at, len)?.into_iter().for_each(|v| v.put_le(&mut bytes));
                Some(bytes)
            }
            Neighbour::Boundary => None,
        };
        let mut incoming = vec![0u8; if matches!(from, Neighbour::Domain(_)) { points * size } else { 0 }];
        match (to, from, &outgoing) {
            (Neighbour::Domain(t), Neighbour::Domain(f), Some(out)) => {
                let (dest, src) = (self.world.process_at_rank(t as i32), self.world.process_at_rank(f as i32));
                mpi::point_to_point::send_receive_into_with_tags(&out[..], &dest, tag, &mut incoming[..], &src, tag);
            }
            (Neighbour::Domain(t), Neighbour::Boundary, Some(out)) => {
                self.world.process_at_rank(t as i32).send_with_tag(&out[..], tag);
            }
            (Neighbour::Boundary, Neighbour::Domain(f), _) => {
                self.world.process_at_rank(f as i32).receive_into_with_tag(&mut incoming[..], tag);
            }
            _ => {}
        }
        if matches!(from, Neighbour::Domain(_)) {
            let values: Vec<T> = incoming.chunks_exact(size).map(T::get_le).collect();
            self.exec.write_box(field, recv_at, len, &values)?;
        }
        Ok(())
    }

    /// Fills the physical-boundary sides of this rank's fields (each with its fill per axis);
    /// the other sides are the exchange's. Call after [`Ranks::exchange`].
    pub fn fill_boundary<T: Element>(&self, sets: &mut [HaloJob<'_, E::Field<T, D>, D>]) -> Result<(), LaunchError> {
        let (d, me) = (&self.decomposition, self.subdomain());
        for (_, fills) in sets.iter() {
            d.check_boundary_fills(fills).map_err(LaunchError::Decomposition)?;
        }
        let on_boundary = |a: usize, s: i8| {
            let mut dir = [0i8; D];
            dir[a] = s;
            d.neighbour(&me, dir) == Neighbour::Boundary
        };
        let mut jobs: Vec<SideJob<'_, E::Field<T, D>, D>> = sets
            .iter_mut()
            .map(|(f, fills)| {
                let sides = std::array::from_fn(|a| [-1i8, 1].map(|s| if on_boundary(a, s) { fills[a] } else { None }));
                (&mut **f, sides)
            })
            .collect();
        self.exec.fill_halo_sides(&mut jobs)
    }

    /// The maximum of `v` over all ranks (NaN if any rank's is NaN).
    pub fn max(&self, v: f64) -> f64 {
        let nan = self.sum(if v.is_nan() { 1.0 } else { 0.0 });
        let mut out = 0.0f64;
        self.world.all_reduce_into(&v, &mut out, SystemOperation::max());
        if nan > 0.0 {
            f64::NAN
        } else {
            out
        }
    }

    /// The sum of `v` over all ranks.
    pub fn sum(&self, v: f64) -> f64 {
        let mut out = 0.0f64;
        self.world.all_reduce_into(&v, &mut out, SystemOperation::sum());
        out
    }

    /// The global field of shape `like` (the global extent, any halo) on rank 0, assembled from
    /// every rank's interior; `None` on the other ranks. Every rank calls it.
    pub fn gather<T: Element>(
        &self,
        field: &E::Field<T, D>,
        like: &Shape<D>,
    ) -> Result<Option<Field<T, D>>, LaunchError> {
        let me = self.subdomain();
        let shape = *self.exec.shape_of(field);
        let halo = shape.halo_widths();
        let size = std::mem::size_of::<T>();
        if like.element_order() != shape.element_order() || like.interior() != self.decomposition.global() {
            return Err(LaunchError::Decomposition(format!(
                "gather: the global shape {} must have the global extent {:?} and the fields' element order {:?}",
                like.describe(),
                self.decomposition.global(),
                shape.element_order()
            )));
        }
        let mine = self.exec.read_box(field, halo, me.extent)?;
        if self.rank() != 0 {
            let mut bytes = Vec::with_capacity(mine.len() * size);
            mine.into_iter().for_each(|v| v.put_le(&mut bytes));
            self.world.process_at_rank(0).send_with_tag(&bytes[..], 1000);
            return Ok(None);
        }
        let host = crate::executor::Host;
        let mut global = Field::zeros(*like);
        let g_halo = like.halo_widths();
        for s in self.decomposition.subdomains() {
            let values = if s.index == 0 {
                mine.clone()
            } else {
                let mut bytes = vec![0u8; s.extent.iter().product::<usize>() * size];
                self.world.process_at_rank(s.index as i32).receive_into_with_tag(&mut bytes[..], 1000);
                bytes.chunks_exact(size).map(T::get_le).collect()
            };
            let at = std::array::from_fn(|a| g_halo[a] + s.offset[a]);
            host.write_box(&mut global, at, s.extent, &values)?;
        }
        Ok(Some(global))
    }
}
