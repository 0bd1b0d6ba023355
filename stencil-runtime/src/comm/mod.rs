//! Messages between subdomains and ranks: the world of processes (one, or MPI ranks) and how a
//! node's ranks are numbered, the transports between ranks (host-staged MPI, NCCL), the
//! deadlines that turn a stalled exchange into an error, and the message buffers (host buffers,
//! device buffers with their peer copies between GPUs of one process).

pub(crate) mod buffer;
#[cfg(feature = "cuda")]
pub(crate) mod gpu_buffer;
#[cfg(feature = "cuda")]
mod nccl;
pub(crate) mod node;
#[cfg(feature = "cuda")]
pub(crate) mod peer;
pub(crate) mod transport;
pub(crate) mod watch;
pub(crate) mod world;
