//! [`Domains`]: the subdomains this process runs, each with its executor, in a [`World`] of
//! one process or of MPI ranks: what a decomposed model is written against. Halo exchange
//! ([`HaloExchange`](super::HaloExchange), or [`Domains::exchange`] for one field, defined next
//! to it), physical
//! boundary fills, global reductions, and scatter/gather of global fields.

use super::decomposition::{Decomposition, Neighbour, Subdomain};
use super::refusal::DistributionError;
use super::workers::Workers;
use crate::comm::transport::{DeviceTransport, Transport};
use crate::comm::world::World;
use crate::error::LaunchError;
use crate::executor::{from_le_bytes, to_le_bytes, Executor, FieldStorage, SideJob};
use crate::field::{Element, Field, HaloFill, Shape};
use std::borrow::Borrow;
use std::ops::Range;
use std::sync::Arc;

/// One field of every subdomain of the process (in order) and the fill of each axis at the
/// physical boundary, for [`Domains::fill_boundary`].
pub type BoundarySet<'a, F, const D: usize> = (&'a mut [F], [Option<HaloFill>; D]);

/// A decomposition, the world it is spread over, and the executor of each subdomain this
/// process holds: every subdomain in one process ([`Domains::new`]), or a consecutive block of
/// subdomains per MPI rank ([`Domains::over_ranks`]). Executors are all `Host`, or one `Gpu`
/// per subdomain (several subdomains may share a GPU).
#[derive(Clone, Debug)]
pub struct Domains<E: Executor, const D: usize> {
    decomposition: Decomposition<D>,
    world: World,
    first: usize,
    execs: Vec<E>,
    /// Moves messages between ranks device to device (NCCL); `None`: host-staged MPI.
    device_transport: Option<Arc<dyn DeviceTransport>>,
    /// One host thread per local subdomain, if asked for ([`Domains::with_host_threads`]).
    workers: Option<Arc<Workers>>,
}

impl<E: Executor, const D: usize> Domains<E, D> {
    /// Every subdomain of `decomposition` in this process, `execs[i]` running subdomain `i`.
    pub fn new(decomposition: Decomposition<D>, execs: Vec<E>) -> Result<Self, LaunchError> {
        Self::over_ranks(World::single(), decomposition, execs)
    }

    /// The subdomains of this rank of `world`: with `k` subdomains per rank (the number of
    /// subdomains divided by the number of ranks), rank `r` holds subdomains `r·k .. (r+1)·k`,
    /// run by `execs` in order.
    pub fn over_ranks(world: World, decomposition: Decomposition<D>, execs: Vec<E>) -> Result<Self, LaunchError> {
        let (n, ranks, rank) = (decomposition.len(), world.size(), world.rank());
        if n % ranks != 0 || n < ranks {
            return Err(
                DistributionError::UnevenRanks { grid: decomposition.grid().to_vec(), subdomains: n, ranks }.into()
            );
        }
        let k = n / ranks;
        if execs.len() != k {
            return Err(DistributionError::ExecutorCount {
                given: execs.len(),
                rank,
                local: k,
                grid: decomposition.grid().to_vec(),
            }
            .into());
        }
        Ok(Domains { decomposition, world, first: rank * k, execs, device_transport: None, workers: None })
    }

    /// Issues the host work of each local subdomain (launches, packs, copies, unpacks) from a
    /// host thread of its own, so that no GPU's launches wait behind another's: for GPU
    /// subdomains (a host executor has its own threads). Nothing changes with one local
    /// subdomain. The environment variable `STENCIL_HOST_THREADS=0` turns it off.
    pub fn with_host_threads(mut self) -> Result<Self, LaunchError> {
        let off = std::env::var("STENCIL_HOST_THREADS").is_ok_and(|v| v == "0");
        self.workers = match self.execs.len() {
            0 | 1 => None,
            _ if off => None,
            n => Some(Arc::new(Workers::new(n)?)),
        };
        Ok(self)
    }

    /// Whether each local subdomain has a host thread of its own.
    pub fn host_threads(&self) -> bool {
        self.workers.is_some()
    }

    /// Runs `job(i)` for every local subdomain `i`: at once on their host threads, or one after
    /// another. The first error (of the lowest subdomain) is returned; with host threads every
    /// job runs to its end first.
    pub(crate) fn each_part(&self, job: &(dyn Fn(usize) -> Result<(), LaunchError> + Sync)) -> Result<(), LaunchError> {
        match &self.workers {
            Some(w) if w.parts() == self.execs.len() => w.each(job),
            _ => (0..self.execs.len()).try_for_each(job),
        }
    }

    /// The decomposition.
    pub fn decomposition(&self) -> &Decomposition<D> {
        &self.decomposition
    }

    /// The processes.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// Indices of this process's subdomains.
    pub fn local_range(&self) -> Range<usize> {
        self.first..self.first + self.execs.len()
    }

    /// This process's subdomains, in order (local index `i` is the `i`-th).
    pub fn subdomains(&self) -> impl Iterator<Item = Subdomain<D>> + '_ {
        self.local_range().map(|i| self.decomposition.subdomain(i))
    }

    /// The local index of subdomain `index`, if this process holds it.
    pub fn local_index(&self, index: usize) -> Option<usize> {
        self.local_range().contains(&index).then(|| index - self.first)
    }

    /// The rank holding subdomain `index`.
    pub fn rank_of(&self, index: usize) -> usize {
        index / self.execs.len().max(1)
    }

    /// How messages between ranks travel: [`Transport::HostStaged`] or [`Transport::Nccl`]
    /// (never `Auto`; see `Domains::with_transport` for GPU subdomains).
    pub fn transport(&self) -> Transport {
        if self.device_transport.is_some() {
            Transport::Nccl
        } else {
            Transport::HostStaged
        }
    }

    /// The device transport, if messages between ranks go device to device.
    pub(crate) fn device_transport(&self) -> Option<&dyn DeviceTransport> {
        self.device_transport.as_deref()
    }

    /// Sends messages between ranks through `t` from now on.
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    pub(crate) fn set_device_transport(&mut self, t: Arc<dyn DeviceTransport>) {
        self.device_transport = Some(t);
    }

    /// The executor of this process's `i`-th subdomain (panics if `i` is out of range, as
    /// indexing a slice does).
    pub fn exec(&self, i: usize) -> &E {
        &self.execs[i]
    }

    /// Every local subdomain's executor, in order.
    pub fn execs(&self) -> &[E] {
        &self.execs
    }

    /// Waits for the work of every local executor.
    pub fn synchronize(&self) -> Result<(), LaunchError> {
        self.execs.iter().try_for_each(|e| e.synchronize())
    }

    /// Fills the physical-boundary sides of every local subdomain's fields: each set holds one
    /// field per local subdomain (in order) and the fill of each axis; only the sides of a
    /// subdomain that lie on the physical boundary are filled (the others are the exchange's),
    /// all sets of a subdomain in one executor call. With the exchange before it, the halos are
    /// what the single-domain run's `fill_halos` gives: exchange first, then this.
    pub fn fill_boundary<T: Element>(
        &self,
        sets: &mut [BoundarySet<'_, E::Field<T, D>, D>],
    ) -> Result<(), LaunchError> {
        let d = &self.decomposition;
        for (fields, fills) in sets.iter() {
            self.check_count(fields.len(), "fill_boundary")?;
            d.check_boundary_fills(fills).map_err(DistributionError::from)?;
        }
        for (i, s) in self.subdomains().enumerate() {
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
                    (&mut fields[i], per_side)
                })
                .collect();
            self.execs[i].fill_halo_sides(&mut jobs)?;
        }
        Ok(())
    }

    /// The local subdomains' fields cut from a global host field (see
    /// [`Decomposition::scatter`]), on their executors. Every rank passes the same global field.
    /// Errors when memory for a part cannot be had (`FieldError::OutOfMemory`).
    pub fn scatter<T: Element>(&self, global: &Field<T, D>) -> Result<Vec<E::Field<T, D>>, LaunchError> {
        let like = global.shape();
        let _span = tracing::debug_span!(target: "stencil::io", "scatter", field = like.describe(), subdomains = self.execs.len()).entered();
        self.subdomains().zip(&self.execs).map(|(s, e)| e.upload(&s.try_part_of(global)?)).collect()
    }

    /// The global host field of shape `like` (the global extent; its halo zero) assembled from
    /// every subdomain's interior, on rank 0 (`None` on the other ranks). Every rank calls it;
    /// it waits for the fields' work.
    pub fn gather<T: Element, F: Borrow<E::Field<T, D>>>(
        &self,
        like: &Shape<D>,
        fields: &[F],
    ) -> Result<Option<Field<T, D>>, LaunchError> {
        self.check_count(fields.len(), "gather")?;
        let _span =
            tracing::debug_span!(target: "stencil::io", "gather", field = like.describe(), rank = self.world.rank())
                .entered();
        if like.interior() != self.decomposition.global() {
            return Err(DistributionError::GatherExtent {
                shape: like.describe(),
                global: self.decomposition.global().to_vec(),
            }
            .into());
        }
        let fields: Vec<&E::Field<T, D>> = fields.iter().map(Borrow::borrow).collect();
        if let Some(f) = fields.iter().find(|f| f.shape().element_order() != like.element_order()) {
            return Err(DistributionError::GatherOrder { field: f.shape().describe(), global: like.describe() }.into());
        }
        let g_halo = like.halo_widths();
        let at = |s: &Subdomain<D>| std::array::from_fn(|a| g_halo[a] + s.offset[a]);
        let mut global = Field::zeros(*like);
        if self.world.size() == 1 {
            // One process: each interior straight into the global field.
            for ((s, e), f) in self.subdomains().zip(&self.execs).zip(fields) {
                let values = interior_values(e, f, s.extent)?;
                global.write_box(at(&s), s.extent, &values)?;
            }
            return Ok(Some(global));
        }
        let mut bytes = Vec::new();
        for ((s, e), f) in self.subdomains().zip(&self.execs).zip(fields) {
            to_le_bytes(&interior_values(e, f, s.extent)?, &mut bytes);
        }
        let Some(all) = self.world.gather_bytes(&bytes) else { return Ok(None) };
        let size = std::mem::size_of::<T>();
        let mut subdomains = self.decomposition.subdomains();
        for rank_bytes in all {
            let mut rest = &rank_bytes[..];
            for s in subdomains.by_ref().take(self.execs.len()) {
                let n = s.extent.iter().product::<usize>() * size;
                let (mine, tail) = rest.split_at(n.min(rest.len()));
                rest = tail;
                // `read_box` order is the layout order of the subdomain's field: the global
                // field's order too (scatter keeps the order of `like`).
                let values: Vec<T> = from_le_bytes(mine);
                global.write_box(at(&s), s.extent, &values)?;
            }
        }
        Ok(Some(global))
    }

    /// The maximum over every subdomain of every rank of per-subdomain values (NaN if any is).
    pub fn max(&self, local: impl IntoIterator<Item = f64>) -> f64 {
        let m = local
            .into_iter()
            .fold(f64::NEG_INFINITY, |m, v| if v.is_nan() || m.is_nan() { f64::NAN } else { m.max(v) });
        self.world.max(m)
    }

    /// The sum over every subdomain of every rank of per-subdomain values (local values in
    /// order, then over ranks).
    pub fn sum(&self, local: impl IntoIterator<Item = f64>) -> f64 {
        self.world.sum(local.into_iter().sum())
    }

    /// Refuses a list of `n` fields that is not one per local subdomain.
    pub(super) fn check_count(&self, n: usize, what: &str) -> Result<(), LaunchError> {
        if n == self.execs.len() {
            return Ok(());
        }
        Err(DistributionError::FieldCount {
            call: what.into(),
            given: n,
            rank: self.world.rank(),
            local: self.execs.len(),
        }
        .into())
    }
}

/// The interior values of a field (layout order): the whole field downloaded in one contiguous
/// copy and its interior taken on the host by rows. Reading the interior box straight from a GPU
/// (a pitched 3D copy into pageable memory) made the snapshot gather of acoustic3d 256³ (two
/// fields) take about 0.7 s.
fn interior_values<E: Executor, T: Element, const D: usize>(
    exec: &E,
    field: &E::Field<T, D>,
    extent: [usize; D],
) -> Result<Vec<T>, LaunchError> {
    let host = exec.download(field)?;
    Ok(host.read_box(host.shape().halo_widths(), extent)?)
}
