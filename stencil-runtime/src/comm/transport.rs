//! How halo messages travel between ranks ([`Transport`]): host-staged through MPI (every
//! build with the `mpi` feature), or device to device through NCCL (GPU subdomains, the `nccl`
//! feature), which [`Domains`](super::Domains) of GPUs take with `Domains::with_transport`.
//! Messages within one process do not depend on it: buffer copies, peer copies between GPUs.
//! NCCL also folds held minima and maxima between the subdomains (`DeviceTransport::all_reduce`).

use crate::domain::{DistributionError, TransportError};
use crate::error::LaunchError;

/// How the halo messages between ranks travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// NCCL where the build has it (`nccl` feature), the subdomains are on GPUs, there are
    /// several ranks, and every subdomain of the run has a GPU of its own; else host-staged.
    Auto,
    /// Each message through the pinned host mirror of its device buffer and MPI (host fields:
    /// MPI directly). Always available with the `mpi` feature.
    HostStaged,
    /// `ncclSend`/`ncclRecv` between the device buffers, issued on the executors' streams: no
    /// host copy and no host wait. One GPU per subdomain, one communicator per subdomain.
    Nccl,
}

impl Transport {
    /// The transport `STENCIL_TRANSPORT` asks for: `auto` (or unset), `mpi` (host-staged) or
    /// `nccl`.
    pub fn from_env() -> Result<Self, LaunchError> {
        match std::env::var("STENCIL_TRANSPORT") {
            Err(_) => Ok(Transport::Auto),
            Ok(v) => Ok(Self::parse(&v).map_err(DistributionError::from)?),
        }
    }

    /// `auto`, `mpi` (host-staged) or `nccl` (for command lines and `STENCIL_TRANSPORT`); any
    /// other name is a [`TransportError`].
    pub fn parse(s: &str) -> Result<Self, TransportError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Transport::Auto),
            "mpi" | "host" | "host-staged" => Ok(Transport::HostStaged),
            "nccl" => Ok(Transport::Nccl),
            other => Err(TransportError { given: other.to_string() }),
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::Auto => "auto",
            Transport::HostStaged => "host-staged MPI",
            Transport::Nccl => "NCCL",
        })
    }
}

/// One message of a device transport: a device buffer of local subdomain `local`, sent to or
/// received from subdomain `peer` (global index). Messages between one pair of subdomains are
/// matched in the order of `order` (the receiving side's tag), on both ranks.
#[cfg_attr(not(feature = "nccl"), allow(dead_code))]
#[derive(Clone, Debug)]
pub(crate) struct DeviceMessage {
    pub local: usize,
    pub address: u64,
    pub bytes: usize,
    pub peer: usize,
    pub order: i32,
    /// The halo the message fills on the receiving side (`axis 0 low halo`, `halo (-1, 1, 0)`).
    pub halo: String,
}

/// One held scalar of a local subdomain folded with every other subdomain's
/// ([`DeviceTransport::all_reduce`]): the `f64` at `piece` (this subdomain's part of a
/// reduction) combined by `op` into the `f64` at `copy` (the subdomain's copy of the result).
#[cfg_attr(not(feature = "nccl"), allow(dead_code))]
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeldFold {
    pub local: usize,
    pub piece: u64,
    pub copy: u64,
    pub op: crate::ReduceOp,
}

/// Moves messages between ranks from device memory to device memory, ordered on the streams
/// of the subdomains' executors (after the packs issued before, before the unpacks after).
pub(crate) trait DeviceTransport: Send + Sync + std::fmt::Debug {
    /// Issues `sends` and `recvs` as one group.
    fn exchange(&self, sends: &[DeviceMessage], recvs: &[DeviceMessage]) -> Result<(), LaunchError>;

    /// Folds held scalars between every subdomain of the run, as one group on the local
    /// subdomains' streams (after the reductions that wrote the pieces, before the launches that
    /// read the copies). Every rank passes the same scalars in the same order, one `HeldFold` per
    /// local subdomain each. Only minima and maxima: their result does not depend on the order
    /// in which the values meet, so it has the single-domain fold's bits.
    fn all_reduce(&self, folds: &[HeldFold]) -> Result<(), LaunchError>;
}

#[cfg(test)]
mod tests {
    use super::{Transport, TransportError};

    #[test]
    fn transports_parse_or_say_what_is_accepted() {
        assert_eq!(Transport::parse("auto"), Ok(Transport::Auto));
        assert_eq!(Transport::parse(""), Ok(Transport::Auto));
        assert_eq!(Transport::parse(" MPI "), Ok(Transport::HostStaged));
        assert_eq!(Transport::parse("nccl"), Ok(Transport::Nccl));
        let e = Transport::parse(" UCX").unwrap_err();
        assert_eq!(e, TransportError { given: "ucx".into() });
        assert!(e.to_string().contains("transport `ucx`: use auto, mpi (host-staged) or nccl"), "{e}");
        assert!(!e.to_string().contains("not built"), "{e}");
        let e = Transport::parse("CUDA-aware").unwrap_err().to_string();
        assert!(e.contains("`cuda-aware`: use auto, mpi (host-staged) or nccl") && e.contains("not built"), "{e}");
        assert_eq!(Transport::Nccl.to_string(), "NCCL");
    }
}
