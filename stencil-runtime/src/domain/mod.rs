//! Running one model over many subdomains: the [`Decomposition`] of a global grid (ASUCA's
//! `DomainManager`), the halo widths fields need (from the stencils' reach, [`HaloWidths`]),
//! and the halo exchange between subdomains in one process ([`Domains::exchange`]): host
//! subdomains, or one GPU per subdomain (peer copies).

mod decomposition;
mod exchange;
mod reach;

pub use decomposition::{Decomposition, DecompositionError, Neighbour, Subdomain};
pub use exchange::{BoundarySet, Domains};
pub use reach::{HaloWidths, ReachError};
