//! Running one model over many subdomains: the [`Decomposition`] of a global grid (ASUCA's
//! `DomainManager`), the halo widths fields need (from the stencils' reach, [`HaloWidths`]),
//! the subdomains a process runs ([`Domains`], in a [`World`] of one process or, with the cargo
//! feature `mpi`, of MPI ranks) and the multi-field halo exchange between them
//! ([`HaloExchange`]: one message per neighbour, packed on the executor; peer copies between
//! GPUs of a process; host-staged MPI or NCCL between ranks, [`Transport`]), and a step with its exchange overlapped
//! by the computation ([`CompCommBinder`], [`Overlap`]).

// One-way dependencies: decomposition, reach, transport, workers, watch <- world <- domains <- exchange (which also holds
// `Domains::exchange`, a one-field HaloExchange), binder <- distributed.
mod binder;
mod decomposition;
mod distributed;
mod domains;
mod exchange;
mod reach;
mod refusal;
mod workers;

#[cfg(feature = "mpi")]
pub use crate::comm::node::node_rank_of;
pub use crate::comm::node::NodeRank;
pub use crate::comm::transport::Transport;
#[cfg_attr(not(feature = "nccl"), allow(unused_imports))]
pub(crate) use crate::comm::transport::{DeviceMessage, DeviceTransport, HeldFold};
#[cfg_attr(not(feature = "nccl"), allow(unused_imports))]
pub(crate) use crate::comm::watch::{
    exchange_error_message, exchange_stall_message, inject_init_failure, inject_skipped_fold, setup_failures, Awaited,
    Deadlines,
};
#[cfg(feature = "nccl")]
pub(crate) use crate::comm::world::timeout as exchange_timeout;
pub use crate::comm::world::World;
pub use binder::{CompCommBinder, Halos, Overlap};
pub use decomposition::{BoundaryFillError, Decomposition, DecompositionError, Neighbour, Subdomain};
pub use distributed::{DistField, Distributed};
pub use domains::{BoundarySet, Domains};
pub use exchange::{HaloExchange, PhaseTimes};
pub use reach::{HaloWidths, ReachError};
pub use refusal::{DistributionError, PlacementError, TransportError};
