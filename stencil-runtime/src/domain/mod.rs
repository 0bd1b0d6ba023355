//! Running one model over many subdomains: the [`Decomposition`] of a global grid (ASUCA's
//! `DomainManager`), the halo widths fields need (from the stencils' reach, [`HaloWidths`]),
//! and the halo exchange between subdomains in one process ([`Domains::exchange`]): host
//! subdomains, or one GPU per subdomain (peer copies); and, with the cargo feature `mpi`, one
//! subdomain per MPI rank ([`Ranks`](ranks::Ranks), host-staged).

mod decomposition;
mod exchange;
#[cfg(feature = "mpi")]
mod ranks;
mod reach;

pub use decomposition::{Decomposition, DecompositionError, Neighbour, Subdomain};
pub use exchange::{BoundarySet, Domains};
#[cfg(feature = "mpi")]
pub use ranks::Ranks;
pub use reach::{HaloWidths, ReachError};
