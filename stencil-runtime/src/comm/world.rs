//! [`World`]: the processes a decomposition is spread over. One process holds every subdomain
//! ([`World::single`]); with the cargo feature `mpi`, the ranks of an MPI communicator hold
//! consecutive blocks of subdomains ([`World::mpi`]). The world moves halo messages between
//! ranks, reduces scalars and gathers bytes to rank 0.

use crate::domain::DistributionError;
use crate::error::LaunchError;
#[cfg(feature = "mpi")]
use std::sync::Arc;

/// The processes of a run.
#[derive(Clone)]
pub struct World {
    #[cfg(feature = "mpi")]
    comm: Option<Arc<Comm>>,
}

/// An MPI communicator that the executors' threads may hold. MPICH's handle is an integer and
/// Open MPI's a pointer, so only the latter is not `Send` by itself; the runtime makes MPI calls
/// on one thread at a time either way (an executor's calls are serialised by its lock, and a
/// model's time loop runs on one thread), as MPI's default threading level asks.
#[cfg(feature = "mpi")]
struct Comm(mpi::topology::SimpleCommunicator);

// SAFETY: see `Comm`: the communicator is used by one thread at a time.
#[cfg(feature = "mpi")]
unsafe impl Send for Comm {}
// SAFETY: as above; shared references make no MPI call concurrently.
#[cfg(feature = "mpi")]
unsafe impl Sync for Comm {}

#[cfg(feature = "mpi")]
impl std::ops::Deref for Comm {
    type Target = mpi::topology::SimpleCommunicator;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "World(rank {} of {})", self.rank(), self.size())
    }
}

/// One message between ranks: the other rank, the tag, and the bytes.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) struct Message<B> {
    /// The other rank.
    pub peer: usize,
    /// The tag both sides use.
    pub tag: i32,
    /// The bytes sent, or the place they are received into.
    pub bytes: B,
    /// What the message is, for an error.
    pub what: String,
}

/// Seconds a rank waits for its halo messages before it aborts the run with a message naming
/// what it waited for: `STENCIL_EXCHANGE_TIMEOUT` (seconds), else 300.
#[cfg(feature = "mpi")]
pub(crate) fn timeout() -> std::time::Duration {
    let s = std::env::var("STENCIL_EXCHANGE_TIMEOUT").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(300.0);
    std::time::Duration::from_secs_f64(s.max(0.001))
}

impl World {
    /// One process that holds every subdomain.
    pub fn single() -> Self {
        World {
            #[cfg(feature = "mpi")]
            comm: None,
        }
    }

    /// The ranks of `comm` (rsmpi), each holding a consecutive block of subdomains.
    #[cfg(feature = "mpi")]
    pub fn mpi(comm: mpi::topology::SimpleCommunicator) -> Self {
        World { comm: Some(Arc::new(Comm(comm))) }
    }

    /// This process's rank (0 in a single process).
    pub fn rank(&self) -> usize {
        #[cfg(feature = "mpi")]
        if let Some(c) = &self.comm {
            use mpi::traits::Communicator;
            return c.rank() as usize;
        }
        0
    }

    /// The number of processes.
    pub fn size(&self) -> usize {
        #[cfg(feature = "mpi")]
        if let Some(c) = &self.comm {
            use mpi::traits::Communicator;
            return c.size() as usize;
        }
        1
    }

    /// Makes a panic on this rank end every rank (`MPI_Abort`, after the panic's message)
    /// instead of leaving the others waiting in their next exchange. Nothing in one process.
    pub fn abort_on_panic(&self) {
        #[cfg(feature = "mpi")]
        if let Some(c) = &self.comm {
            let comm = c.clone();
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                previous(info);
                use mpi::traits::Communicator;
                comm.abort(101);
            }));
        }
    }

    /// The communicator, for MPI calls of the model's own.
    #[cfg(feature = "mpi")]
    pub fn communicator(&self) -> Option<&mpi::topology::SimpleCommunicator> {
        self.comm.as_deref().map(|c| &c.0)
    }

    /// The maximum of `v` over all processes (NaN if any is NaN).
    pub fn max(&self, v: f64) -> f64 {
        #[cfg(feature = "mpi")]
        if let Some(c) = &self.comm {
            use mpi::collective::SystemOperation;
            use mpi::traits::CommunicatorCollectives;
            let nan = self.sum(if v.is_nan() { 1.0 } else { 0.0 });
            let mut out = 0.0f64;
            c.all_reduce_into(&v, &mut out, SystemOperation::max());
            return if nan > 0.0 { f64::NAN } else { out };
        }
        v
    }

    /// The sum of `v` over all processes (in rank order on every rank count MPI chooses; the
    /// bits may differ from a single process's sum of the same values).
    pub fn sum(&self, v: f64) -> f64 {
        #[cfg(feature = "mpi")]
        if let Some(c) = &self.comm {
            use mpi::collective::SystemOperation;
            use mpi::traits::CommunicatorCollectives;
            let mut out = 0.0f64;
            c.all_reduce_into(&v, &mut out, SystemOperation::sum());
            return out;
        }
        v
    }

    /// Rank 0's `bytes` on every process (every rank passes a slice of the same length).
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    pub(crate) fn broadcast_bytes(&self, bytes: &mut [u8]) {
        #[cfg(feature = "mpi")]
        if let Some(c) = &self.comm {
            use mpi::traits::{Communicator, Root};
            c.process_at_rank(0).broadcast_into(bytes);
        }
        #[cfg(not(feature = "mpi"))]
        let _ = bytes;
    }

    /// Every process's `bytes` (of one length on every rank) on every process, in rank order.
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    pub(crate) fn all_gather_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        #[cfg(feature = "mpi")]
        if let Some(c) = &self.comm {
            use mpi::traits::{Communicator, CommunicatorCollectives};
            let mut all = vec![0u8; bytes.len() * c.size() as usize];
            c.all_gather_into(bytes, &mut all[..]);
            return all;
        }
        bytes.to_vec()
    }

    /// Every process's `bytes` on rank 0, in rank order (`None` elsewhere).
    pub fn gather_bytes(&self, bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
        #[cfg(feature = "mpi")]
        if let Some(c) = &self.comm {
            use mpi::traits::{Communicator, Destination, Source};
            const TAG: i32 = 1 << 14;
            let len = [bytes.len() as u64];
            if c.rank() != 0 {
                c.process_at_rank(0).send_with_tag(&len[..], TAG);
                c.process_at_rank(0).send_with_tag(bytes, TAG + 1);
                return None;
            }
            let mut all = vec![bytes.to_vec()];
            for r in 1..c.size() {
                let mut n = [0u64];
                c.process_at_rank(r).receive_into_with_tag(&mut n[..], TAG);
                let mut v = vec![0u8; n[0] as usize];
                c.process_at_rank(r).receive_into_with_tag(&mut v[..], TAG + 1);
                all.push(v);
            }
            return Some(all);
        }
        Some(vec![bytes.to_vec()])
    }

    /// Ends every rank (`MPI_Abort` with `code`), after this rank's message was printed.
    #[cfg(feature = "nccl")]
    pub(crate) fn abort(&self, code: i32) -> ! {
        use std::io::Write;
        let _ = std::io::stderr().flush();
        if let Some(c) = &self.comm {
            use mpi::traits::Communicator;
            c.abort(code);
        }
        std::process::exit(code)
    }

    /// Every rank's outcome of a set-up step that may wait on the others inside a library (NCCL's
    /// bootstrap), made known to every rank as soon as it is had, so that one rank's failure ends
    /// the others' wait (collective). `poll(give_up)` is called until it returns this rank's
    /// outcome; `give_up` is true once another rank reported a failure (then the step is to be
    /// abandoned and its outcome returned). A rank that has no word from some rank after `limit`
    /// prints a message naming `what` and those ranks, and aborts the run. Returns the outcomes
    /// in rank order.
    #[cfg(feature = "nccl")]
    pub(crate) fn outcomes(
        &self,
        mut poll: impl FnMut(bool) -> Option<Result<(), String>>,
        limit: std::time::Duration,
        what: &str,
    ) -> Vec<Result<(), String>> {
        let Some(c) = &self.comm else {
            loop {
                if let Some(own) = poll(false) {
                    return vec![own];
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        };
        use mpi::point_to_point::{Destination, Source};
        use mpi::traits::Communicator;
        // A communicator of its own, so that the notices match nothing else.
        let comm = c.duplicate();
        let (me, n) = (comm.rank() as usize, comm.size() as usize);
        const TAG: i32 = 1;
        let started = std::time::Instant::now();
        let mut heard: Vec<Option<Result<(), String>>> = vec![None; n];
        let mut sends = Vec::new();
        loop {
            if heard[me].is_none() {
                let give_up = heard.iter().any(|h| matches!(h, Some(Err(_))));
                if let Some(own) = poll(give_up) {
                    // Leaked: a few hundred bytes per set-up, alive until the sends complete.
                    let notice: &'static [u8] = Box::leak(super::watch::encode_outcome(&own).into_boxed_slice());
                    for r in (0..n).filter(|&r| r != me) {
                        sends.push(comm.process_at_rank(r as i32).immediate_send_with_tag(
                            mpi::request::StaticScope,
                            notice,
                            TAG,
                        ));
                    }
                    heard[me] = Some(own);
                }
            }
            while let Some(status) = comm.any_process().immediate_probe_with_tag(TAG) {
                let from = status.source_rank() as usize;
                let mut notice = vec![0u8; super::watch::NOTICE];
                comm.process_at_rank(from as i32).receive_into_with_tag(&mut notice[..], TAG);
                heard[from] = Some(super::watch::decode_outcome(&notice));
            }
            if heard.iter().all(Option::is_some) {
                break;
            }
            if started.elapsed() > limit {
                let missing: Vec<usize> = (0..n).filter(|&r| heard[r].is_none()).collect();
                eprintln!("{}", super::watch::setup_stall_message(me, started.elapsed(), what, &missing));
                self.abort(70);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        for s in sends {
            s.wait();
        }
        heard.into_iter().map(|h| h.expect("heard from every rank")).collect()
    }

    /// Sends and receives `messages` between ranks, all at once (non-blocking sends and
    /// receives, then a wait with a timeout: a rank that waits longer than
    /// `STENCIL_EXCHANGE_TIMEOUT` seconds, default 300, aborts every rank with a message that
    /// names the messages it waited for; MPI cannot hand back buffers of pending receives).
    pub(crate) fn messages(
        &self,
        sends: Vec<Message<&[u8]>>,
        recvs: Vec<Message<&mut [u8]>>,
    ) -> Result<(), LaunchError> {
        if sends.is_empty() && recvs.is_empty() {
            return Ok(());
        }
        #[cfg(feature = "mpi")]
        if let Some(c) = &self.comm {
            return messages_mpi(c, sends, recvs);
        }
        Err(DistributionError::SingleProcess {
            messages: sends.iter().map(|m| m.what.clone()).chain(recvs.iter().map(|m| m.what.clone())).collect(),
        }
        .into())
    }
}

#[cfg(feature = "mpi")]
fn messages_mpi(
    c: &mpi::topology::SimpleCommunicator,
    sends: Vec<Message<&[u8]>>,
    mut recvs: Vec<Message<&mut [u8]>>,
) -> Result<(), LaunchError> {
    use mpi::traits::{Communicator, Destination, Equivalence, Source};
    let started = std::time::Instant::now();
    let limit = timeout();
    let me = c.rank();
    let whats: Vec<String> = recvs.iter().map(|m| format!("{} from rank {}", m.what, m.peer)).collect();
    let lengths: Vec<usize> = recvs.iter().map(|m| m.bytes.len()).collect();
    mpi::request::scope(|scope| {
        let mut pending = Vec::new();
        for (i, m) in recvs.iter_mut().enumerate() {
            pending.push((
                Some(i),
                c.process_at_rank(m.peer as i32).immediate_receive_into_with_tag(scope, &mut *m.bytes, m.tag),
            ));
        }
        for m in &sends {
            pending.push((None, c.process_at_rank(m.peer as i32).immediate_send_with_tag(scope, m.bytes, m.tag)));
        }
        let mut pending: Vec<_> = pending.into_iter().map(|(i, r)| (i, Some(r))).collect();
        loop {
            let mut open = 0;
            for (i, slot) in pending.iter_mut() {
                if let Some(r) = slot.take() {
                    match r.test() {
                        Ok(status) => {
                            // A shorter message than the halo it fills: the ranks do not run the
                            // same exchange, and the halo would be left partly stale.
                            let Some(i) = *i else { continue };
                            let got = status.count(u8::equivalent_datatype());
                            if usize::try_from(got).ok() != Some(lengths[i]) {
                                eprintln!(
                                    "stencil-runtime: rank {me} received {got} bytes for {} where {} were \
                                     expected, and aborts the run: the ranks do not run the same exchange (every \
                                     rank must exchange the same fields in the same order, with the same \
                                     STENCIL_ONE_ROUND_HALOS and STENCIL_DIRECT_HALOS)",
                                    whats[i], lengths[i]
                                );
                                c.abort(70);
                            }
                        }
                        Err(r) => {
                            *slot = Some(r);
                            open += 1;
                        }
                    }
                }
            }
            if open == 0 {
                return;
            }
            if started.elapsed() > limit {
                let waiting: Vec<&str> = pending
                    .iter()
                    .filter(|(_, r)| r.is_some())
                    .filter_map(|(i, _)| i.map(|i| whats[i].as_str()))
                    .collect();
                eprintln!(
                    "stencil-runtime: rank {me} waited {:.0} s for halo messages ({}) and aborts the run: a \
                     neighbouring rank stopped, failed or does not call the same exchange (every rank must \
                     exchange the same fields in the same order); raise STENCIL_EXCHANGE_TIMEOUT if its steps \
                     are just slow",
                    limit.as_secs_f64(),
                    if waiting.is_empty() { "sends not delivered".to_string() } else { waiting.join(", ") }
                );
                c.abort(70);
            }
            std::thread::yield_now();
        }
    });
    Ok(())
}
