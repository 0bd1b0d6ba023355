//! NCCL between ranks ([`Transport::Nccl`]): halo messages sent device buffer to device buffer
//! with `ncclSend`/`ncclRecv`, issued on the subdomains' streams after their pack kernels and
//! before their unpack kernels, so a step never waits on the host for its halos.
//!
//! Every subdomain of the run is one NCCL rank (its global index) with its own communicator, so a
//! process may hold several subdomains, each on its own GPU. Setting up is collective over the
//! world: rank 0's unique id is broadcast through MPI, every process checks that NCCL loads and
//! that no two subdomains of the run share a GPU (NCCL refuses that), and the communicators are
//! made non-blocking, each rank telling the others whether its own were made, so that one rank's
//! failure is an `Err` on every rank instead of a wait in NCCL's bootstrap.
//!
//! A thread watches the communicators: an asynchronous error NCCL reports
//! (`ncclCommGetAsyncError`), or an exchange that has waited on the device longer than
//! `STENCIL_EXCHANGE_TIMEOUT` seconds (default 300; a peer that stopped), ends the run: the rank
//! prints which ranks and halo messages it waited for, aborts its communicators
//! (`ncclCommAbort`) and calls `MPI_Abort`, as the host-staged transport does. Exchanges issued
//! while a step is recorded (a CUDA graph) are not under the deadline when the graph is
//! replayed; NCCL's asynchronous errors are watched all along.

use crate::domain::{Domains, Transport};
use crate::error::LaunchError;
#[cfg(not(feature = "nccl"))]
use crate::gpu::cuda::CudaError;
use crate::gpu::cuda::Gpu;

#[cfg(feature = "nccl")]
mod links {
    use crate::domain::{
        exchange_error_message, exchange_stall_message, exchange_timeout, inject_init_failure, inject_skipped_fold,
        setup_failures, Awaited, Deadlines, DeviceMessage, DeviceTransport, HeldFold, World,
    };
    use crate::error::LaunchError;
    use crate::gpu::cuda::CudaError;
    use crate::gpu::cuda::Gpu;
    use cudarc::driver::sys::{CUevent_flags, CUstreamCaptureStatus};
    use cudarc::driver::{result as driver, sys as dsys, CudaEvent};
    use cudarc::nccl::{result as nccl, sys};
    use std::sync::{Arc, Condvar, Mutex, PoisonError};
    use std::time::{Duration, Instant};

    /// A communicator handle that the watcher thread may hold (see the SAFETY notes below).
    #[derive(Clone, Copy)]
    struct Comm(sys::ncclComm_t);
    // SAFETY: NCCL allows `ncclCommGetAsyncError` and `ncclCommAbort` from any thread (they are
    // what a watchdog thread calls); every other call is made under `NcclLinks::issuing` or from
    // `drop`.
    unsafe impl Send for Comm {}
    // SAFETY: as above.
    unsafe impl Sync for Comm {}

    /// One NCCL communicator per local subdomain (see the module docs), and the thread that
    /// watches them: NCCL's asynchronous errors, and a deadline on the exchanges in flight.
    pub(super) struct NcclLinks {
        comms: Vec<(Gpu, sys::ncclComm_t)>,
        /// Held from `ncclGroupStart` to `ncclGroupEnd` of an exchange.
        issuing: Mutex<()>,
        watch: Arc<Watch>,
        watcher: Option<std::thread::JoinHandle<()>>,
        /// The global index of local subdomain 0, the subdomains per rank, and the ranks.
        first: usize,
        per_rank: usize,
        ranks: usize,
    }

    /// What the watcher thread and the exchanges share.
    struct Watch {
        state: Mutex<WatchState>,
        wake: Condvar,
    }

    struct WatchState {
        deadlines: Deadlines<Pending>,
        stop: bool,
    }

    /// An exchange in flight: an event after it on each stream it was issued on, and the
    /// messages it receives.
    struct Pending {
        events: Vec<(Gpu, CudaEvent)>,
        awaited: Vec<Awaited>,
    }

    // SAFETY: NCCL communicators may be used from any thread, one thread at a time: the only calls
    // after set-up are `exchange`'s, each a whole group issued under `NcclLinks::issuing`, the
    // watcher's (asynchronous errors, abort: allowed from any thread), and `drop`, which has
    // `&mut self` and stops the watcher first.
    unsafe impl Send for NcclLinks {}
    // SAFETY: as above; `issuing` serialises the groups of threads that share the links.
    unsafe impl Sync for NcclLinks {}

    impl std::fmt::Debug for NcclLinks {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "NcclLinks({} communicator(s))", self.comms.len())
        }
    }

    impl Drop for NcclLinks {
        fn drop(&mut self) {
            // Wait for the exchanges in flight while the watcher still watches them.
            for (gpu, _) in &self.comms {
                let _ = gpu.synchronize();
            }
            self.watch.state.lock().unwrap_or_else(PoisonError::into_inner).stop = true;
            self.watch.wake.notify_all();
            if let Some(w) = self.watcher.take() {
                let _ = w.join();
            }
            let limit = exchange_timeout();
            for (gpu, comm) in &self.comms {
                let _ = gpu.bind();
                // SAFETY: the communicator was made by `ncclCommInitRankConfig` and is finalised and
                // destroyed once, after the work queued on its stream.
                unsafe {
                    if nccl::comm_finalize(*comm).is_ok() {
                        let _ = settle(&[Comm(*comm)], limit);
                    }
                    let _ = nccl::comm_destroy(*comm);
                }
            }
        }
    }

    fn text(e: sys::ncclResult_t) -> String {
        // SAFETY: ncclGetErrorString returns a static NUL-terminated string for any code.
        let text = unsafe { std::ffi::CStr::from_ptr(sys::ncclGetErrorString(e)) }.to_string_lossy().into_owned();
        format!("{e:?}: {text}")
    }

    fn nccl_error(during: &str, e: nccl::NcclError) -> LaunchError {
        CudaError::Nccl { during: during.to_string(), detail: text(e.0) }.into()
    }

    fn refuse(during: &str, detail: String) -> LaunchError {
        CudaError::Nccl { during: during.to_string(), detail }.into()
    }

    /// The communicator's asynchronous state: `Ok(true)` done, `Ok(false)` still in progress
    /// (non-blocking set-up or enqueue), `Err` the error NCCL reports.
    fn state(comm: Comm) -> Result<bool, String> {
        let mut state = sys::ncclResult_t::ncclSuccess;
        // SAFETY: a live communicator; writes one result.
        let r = unsafe { sys::ncclCommGetAsyncError(comm.0, &mut state) };
        match (r, state) {
            (sys::ncclResult_t::ncclSuccess, sys::ncclResult_t::ncclSuccess) => Ok(true),
            (sys::ncclResult_t::ncclSuccess, sys::ncclResult_t::ncclInProgress) => Ok(false),
            (sys::ncclResult_t::ncclSuccess, e) | (e, _) => Err(text(e)),
        }
    }

    /// Waits (up to `limit`) until no communicator of `comms` is in progress.
    fn settle(comms: &[Comm], limit: Duration) -> Result<(), String> {
        let started = Instant::now();
        for &c in comms {
            while !state(c)? {
                if started.elapsed() > limit {
                    return Err(format!("still in progress after {:.0} s", limit.as_secs_f64()));
                }
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    /// Aborts `comms` (in a thread of its own, waited for at most 10 s: the run is ended next
    /// either way).
    fn abort_all(comms: Vec<Comm>) {
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for c in comms {
                // SAFETY: a communicator of these links, aborted once; no other call follows.
                let _ = unsafe { nccl::comm_abort(c.0) };
            }
            let _ = done.send(());
        });
        let _ = wait.recv_timeout(Duration::from_secs(10));
    }

    /// A non-blocking communicator configuration (`NCCL_CONFIG_INITIALIZER`, `blocking = 0`):
    /// set-up and enqueue return at once, so that a set-up that waits on a failed rank can be
    /// aborted. The version is 2.14's, the first with `blocking`: NCCL keeps its defaults for the
    /// fields of later versions.
    fn nonblocking_config() -> sys::ncclConfig_t {
        // SAFETY: a plain C struct of integers and pointers, for which all zeros is valid (and
        // each field is set below).
        let mut config: sys::ncclConfig_t = unsafe { std::mem::zeroed() };
        config.size = std::mem::size_of::<sys::ncclConfig_t>();
        config.magic = 0xcafe_beef;
        config.version = 21400;
        config.blocking = 0;
        // Every other field NCCL_CONFIG_UNDEF_INT or NULL, as the initializer leaves them.
        let undef = i32::MIN;
        config.cgaClusterSize = undef;
        config.minCTAs = undef;
        config.maxCTAs = undef;
        config.netName = std::ptr::null();
        config.splitShare = undef;
        config.trafficClass = undef;
        config.commName = std::ptr::null();
        config.collnetEnable = undef;
        config.CTAPolicy = undef;
        config.shrinkShare = undef;
        config.nvlsCTAs = undef;
        config.nChannelsPerNetPeer = undef;
        config.nvlinkCentricSched = undef;
        config.graphUsageMode = undef;
        config.numRmaCtx = undef;
        config.maxP2pPeers = undef;
        config
    }

    /// Whether `result` is `Ok` on every rank (collective): `Err` on every rank when it failed on
    /// any, naming how many; this rank's own error is returned where it has one.
    fn agree<T>(world: &World, result: &Result<T, LaunchError>, during: &str) -> Result<(), LaunchError> {
        let failed = world.sum(if result.is_err() { 1.0 } else { 0.0 });
        match result {
            Err(e) if failed > 1.0 => {
                Err(refuse(during, format!("{} (it failed on {} other rank(s) too)", e.message(), failed - 1.0)))
            }
            Err(e) => Err(refuse(during, e.message())),
            Ok(_) if failed > 0.0 => {
                Err(refuse(during, format!("it failed on {failed} other rank(s): see their errors")))
            }
            Ok(_) => Ok(()),
        }
    }

    /// The host and PCI bus id of `gpu`'s device: two subdomains with the same key share a GPU.
    fn device_key(gpu: &Gpu) -> Result<[u8; KEY], LaunchError> {
        let mut key = [0u8; KEY];
        let mut host = [0 as libc::c_char; 64];
        // SAFETY: writes at most 63 bytes and a NUL into `host`.
        unsafe { libc::gethostname(host.as_mut_ptr(), host.len() - 1) };
        let host: Vec<u8> = host.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        let mut bus = [0 as std::ffi::c_char; 32];
        gpu.bind()?;
        let dev = driver::device::get(gpu.ordinal() as i32).map_err(|e| gpu.fail("reading the device", e))?;
        // SAFETY: writes at most 32 bytes, NUL-terminated, into `bus`.
        unsafe { dsys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), bus.len() as i32, dev) }
            .result()
            .map_err(|e| gpu.fail("reading the PCI bus id", e))?;
        let bus: Vec<u8> = bus.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        let text = [&host[..host.len().min(KEY - 33)], b"/", &bus[..bus.len().min(32)]].concat();
        key[..text.len()].copy_from_slice(&text);
        Ok(key)
    }

    /// Bytes of a device key.
    const KEY: usize = 96;

    impl NcclLinks {
        /// The communicators of `gpus` (local subdomains `first..first + gpus.len()` of `total`),
        /// made collectively over `world`.
        pub(super) fn new(world: &World, gpus: &[Gpu], first: usize, total: usize) -> Result<Self, LaunchError> {
            let during = "setting up the communicators";
            // SAFETY: only tries to load libnccl.
            let loaded = unsafe { sys::is_culib_present() };
            let missing = world.sum(if loaded { 0.0 } else { 1.0 });
            if missing > 0.0 {
                return Err(refuse(
                    during,
                    format!(
                        "libnccl.so could not be loaded on {missing} of {} rank(s) (this rank: {})",
                        world.size(),
                        if loaded { "loaded" } else { "not found" }
                    ),
                ));
            }
            // Every step that can fail on one rank is agreed on by all of them before the next
            // collective call, so that a failure is an `Err` on every rank, not a hang.
            let keys: Result<Vec<u8>, LaunchError> =
                gpus.iter().map(device_key).collect::<Result<Vec<_>, _>>().map(|k| k.concat());
            agree(world, &keys, "reading the GPUs' PCI bus ids")?;
            let keys = keys?;
            let all = world.all_gather_bytes(&keys);
            let name =
                |i: usize| String::from_utf8_lossy(&all[i * KEY..(i + 1) * KEY]).trim_end_matches('\0').to_string();
            for a in 0..total {
                for b in a + 1..total {
                    if all[a * KEY..(a + 1) * KEY] == all[b * KEY..(b + 1) * KEY] {
                        return Err(refuse(
                            during,
                            format!(
                                "subdomains {a} and {b} are both on GPU {}; NCCL needs one GPU per subdomain: run one \
                                 subdomain per GPU (e.g. `mpiexec -n G` with G GPUs), or use the host-staged transport",
                                name(a)
                            ),
                        ));
                    }
                }
            }
            // Rank 0's unique id, and whether it could make one (the last byte).
            let mut id = [0u8; 129];
            let made = if world.rank() == 0 { nccl::get_uniqueid().map(Some) } else { Ok(None) };
            if let Ok(Some(unique)) = &made {
                for (d, s) in id.iter_mut().zip(unique.internal) {
                    *d = s as u8;
                }
                id[128] = 1;
            }
            world.broadcast_bytes(&mut id);
            if id[128] == 0 {
                return Err(match made {
                    Err(e) => nccl_error("making the unique id on rank 0", e),
                    _ => refuse(during, "rank 0 could not make the unique id (its error says why)".into()),
                });
            }
            let unique = sys::ncclUniqueId { internal: std::array::from_fn(|i| id[i] as std::ffi::c_char) };
            let comms = Self::init(world, gpus, unique, first, total)?;
            let per_rank = total / world.size().max(1);
            let watch = Arc::new(Watch {
                state: Mutex::new(WatchState { deadlines: Deadlines::default(), stop: false }),
                wake: Condvar::new(),
            });
            let watcher = {
                let (watch, world) = (watch.clone(), world.clone());
                let raw: Vec<Comm> = comms.iter().map(|(_, c)| Comm(*c)).collect();
                std::thread::Builder::new()
                    .name("stencil-nccl-watch".into())
                    .spawn(move || watch_loop(&watch, &world, &raw))
                    .map_err(|e| refuse(during, format!("starting the thread that watches NCCL: {e}")))?
            };
            Ok(NcclLinks {
                comms,
                issuing: Mutex::new(()),
                watch,
                watcher: Some(watcher),
                first,
                per_rank: per_rank.max(1),
                ranks: world.size(),
            })
        }

        /// The communicators themselves, non-blocking: every rank tells the others whether its
        /// own were made (`World::outcomes`), so that a rank whose `ncclCommInitRankConfig` fails
        /// ends the others' wait in NCCL's bootstrap (they abort theirs), and a rank that stops
        /// ends the run after `STENCIL_EXCHANGE_TIMEOUT` seconds with a message naming it.
        fn init(
            world: &World,
            gpus: &[Gpu],
            unique: sys::ncclUniqueId,
            first: usize,
            total: usize,
        ) -> Result<Vec<(Gpu, sys::ncclComm_t)>, LaunchError> {
            let during = "making the communicators (ncclCommInitRankConfig)";
            let mut comms: Vec<(Gpu, sys::ncclComm_t)> = Vec::with_capacity(gpus.len());
            let mut own_error: Option<String> = None;
            let inject = inject_init_failure(world.rank());
            for (i, g) in gpus.iter().enumerate() {
                if let Err(e) = g.bind() {
                    own_error = Some(e.message());
                    break;
                }
                let mut config = nonblocking_config();
                let mut comm: sys::ncclComm_t = std::ptr::null_mut();
                // An injected failure asks for a rank beyond the run: NCCL refuses it at once.
                let rank = if inject { total } else { first + i };
                // SAFETY: every subdomain of the run joins once, with the same id and its own rank;
                // the current context is its GPU's.
                let r =
                    unsafe { sys::ncclCommInitRankConfig(&mut comm, total as i32, unique, rank as i32, &mut config) };
                match r {
                    sys::ncclResult_t::ncclSuccess | sys::ncclResult_t::ncclInProgress => comms.push((g.clone(), comm)),
                    e => {
                        own_error = Some(format!(
                            "ncclCommInitRankConfig for subdomain {} failed: {}{}",
                            first + i,
                            text(e),
                            if inject { " (injected by STENCIL_TEST_NCCL_INIT_FAIL)" } else { "" }
                        ));
                        if !comm.is_null() {
                            comms.push((g.clone(), comm));
                        }
                        break;
                    }
                }
            }
            let raw = |comms: &Vec<(Gpu, sys::ncclComm_t)>| comms.iter().map(|(_, c)| Comm(*c)).collect::<Vec<_>>();
            let outcomes = world.outcomes(
                |give_up| {
                    if own_error.is_none() && !give_up {
                        let mut done = true;
                        for c in raw(&comms) {
                            match state(c) {
                                Ok(d) => done &= d,
                                Err(e) => {
                                    own_error = Some(format!("ncclCommInitRankConfig: {e}"));
                                    break;
                                }
                            }
                        }
                        if own_error.is_none() {
                            return done.then_some(Ok(()));
                        }
                    }
                    abort_all(raw(&comms));
                    comms.clear();
                    Some(Err(own_error.clone().unwrap_or_else(|| {
                        "gave up (its communicators aborted) after another rank failed".to_string()
                    })))
                },
                exchange_timeout(),
                "the NCCL communicators to be made",
            );
            if let Some(failed) = setup_failures(&outcomes) {
                abort_all(raw(&comms));
                return Err(refuse(during, failed));
            }
            Ok(comms)
        }
    }

    /// The watcher thread: every 50 ms, retires the exchanges finished on the device, and ends
    /// the run (message, `ncclCommAbort`, `MPI_Abort`) when NCCL reports an error or the oldest
    /// exchange waited longer than `STENCIL_EXCHANGE_TIMEOUT`.
    fn watch_loop(watch: &Watch, world: &World, comms: &[Comm]) {
        let limit = exchange_timeout();
        let me = world.rank();
        let mut state = watch.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if state.stop {
                return;
            }
            while let Some(p) = state.deadlines.oldest() {
                let done = p.events.iter().all(|(gpu, e)| gpu.bind().is_ok() && e.is_complete());
                if !done {
                    break;
                }
                state.deadlines.finished(Instant::now());
            }
            let awaited = || state.deadlines.oldest().map(|p| p.awaited.clone()).unwrap_or_default();
            let failure = match comms.iter().find_map(|&c| state_error(c)) {
                Some(e) => Some(exchange_error_message(me, &e, &awaited())),
                None => state
                    .deadlines
                    .overdue(Instant::now(), limit)
                    .map(|(waited, p)| exchange_stall_message(me, waited, &p.awaited)),
            };
            if let Some(message) = failure {
                eprintln!("{message}");
                abort_all(comms.to_vec());
                world.abort(70);
            }
            state = watch.wake.wait_timeout(state, Duration::from_millis(50)).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// NCCL's asynchronous error on `comm`, if it has one.
    fn state_error(comm: Comm) -> Option<String> {
        state(comm).err()
    }

    impl DeviceTransport for NcclLinks {
        fn exchange(&self, sends: &[DeviceMessage], recvs: &[DeviceMessage]) -> Result<(), LaunchError> {
            if sends.is_empty() && recvs.is_empty() {
                return Ok(());
            }
            let key = |m: &&DeviceMessage| (m.local, m.peer, m.order);
            let mut sends: Vec<&DeviceMessage> = sends.iter().collect();
            let mut recvs: Vec<&DeviceMessage> = recvs.iter().collect();
            sends.sort_by_key(key);
            recvs.sort_by_key(key);
            let during = "exchanging halo messages";
            let _issuing = self.issuing.lock().unwrap_or_else(PoisonError::into_inner);
            nccl::group_start().map_err(|e| nccl_error(during, e))?;
            let issued = (|| {
                let sends = sends.iter().map(|m| (m, true));
                for (m, send) in sends.chain(recvs.iter().map(|m| (m, false))) {
                    let (gpu, comm) = &self.comms[m.local];
                    let (ty, peer, stream) = (sys::ncclDataType_t::ncclUint8, m.peer as i32, gpu.cu_stream() as _);
                    // SAFETY: `m.bytes` bytes of a device buffer of this communicator's GPU (the
                    // exchange's send or receive buffer), alive until the stream has passed the
                    // operation: the exchange owns its buffers and frees them after a stream
                    // synchronisation.
                    let r = unsafe {
                        if send {
                            nccl::send(m.address as *const _, m.bytes, ty, peer, *comm, stream)
                        } else {
                            nccl::recv(m.address as *mut _, m.bytes, ty, peer, *comm, stream)
                        }
                    };
                    r.map_err(|e| nccl_error(during, e))?;
                }
                Ok(())
            })();
            let ended = nccl::group_end().map_err(|e| nccl_error(during, e));
            issued.and(ended.map(|_| ()))?;
            // Non-blocking communicators may still be enqueueing: wait for that (not for the
            // transfers, which the device does).
            let mut used: Vec<usize> = sends.iter().chain(&recvs).map(|m| m.local).collect();
            used.sort_unstable();
            used.dedup();
            let comms: Vec<Comm> = used.iter().map(|&l| Comm(self.comms[l].1)).collect();
            settle(&comms, exchange_timeout()).map_err(|e| refuse(during, e))?;
            let awaited = recvs
                .iter()
                .map(|m| Awaited {
                    what: format!("{} of subdomain {} from subdomain {}", m.halo, self.first + m.local, m.peer),
                    rank: m.peer / self.per_rank,
                })
                .collect();
            self.watch_exchange(&used, awaited)
        }

        fn all_reduce(&self, folds: &[HeldFold]) -> Result<(), LaunchError> {
            let during = "folding held scalars between the subdomains";
            let op = |f: &HeldFold| match f.op {
                crate::ReduceOp::Min => Ok(sys::ncclRedOp_t::ncclMin),
                crate::ReduceOp::Max => Ok(sys::ncclRedOp_t::ncclMax),
                crate::ReduceOp::Sum => Err(refuse(
                    during,
                    "a sum is folded on the host: NCCL would add the pieces in its own order, not the \
                     subdomains' order"
                        .into(),
                )),
            };
            let ops = folds.iter().map(op).collect::<Result<Vec<_>, _>>()?;
            if folds.is_empty() || inject_skipped_fold() {
                return Ok(());
            }
            let _issuing = self.issuing.lock().unwrap_or_else(PoisonError::into_inner);
            nccl::group_start().map_err(|e| nccl_error(during, e))?;
            let issued = folds.iter().zip(&ops).try_for_each(|(f, &op)| {
                let (gpu, comm) = &self.comms[f.local];
                // SAFETY: `piece` and `copy` are distinct `f64`s in device memory of this
                // communicator's GPU (held scalars of the subdomain's executor), which the
                // distributed executor keeps alive until its parts' streams have passed them.
                let r = unsafe {
                    nccl::all_reduce(
                        f.piece as *const _,
                        f.copy as *mut _,
                        1,
                        sys::ncclDataType_t::ncclFloat64,
                        op,
                        *comm,
                        gpu.cu_stream() as _,
                    )
                };
                r.map(|_| ()).map_err(|e| nccl_error(during, e))
            });
            let ended = nccl::group_end().map_err(|e| nccl_error(during, e));
            issued.and(ended.map(|_| ()))?;
            let mut used: Vec<usize> = folds.iter().map(|f| f.local).collect();
            used.sort_unstable();
            used.dedup();
            let comms: Vec<Comm> = used.iter().map(|&l| Comm(self.comms[l].1)).collect();
            settle(&comms, exchange_timeout()).map_err(|e| refuse(during, e))?;
            let me = self.first / self.per_rank;
            let awaited = (0..self.ranks)
                .filter(|&r| r != me)
                .map(|rank| Awaited { what: "the all-reduce of held scalars".into(), rank })
                .collect();
            self.watch_exchange(&used, awaited)
        }
    }

    impl NcclLinks {
        /// Puts the exchange just issued on the streams of local subdomains `used` under the
        /// watcher's deadline (not while a step is being recorded: recorded work runs later).
        fn watch_exchange(&self, used: &[usize], awaited: Vec<Awaited>) -> Result<(), LaunchError> {
            let recording = used.iter().any(|&l| {
                !matches!(
                    self.comms[l].0.stream().capture_status(),
                    Ok(CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
                )
            });
            if recording {
                return Ok(());
            }
            let mut events = Vec::with_capacity(used.len());
            for &l in used {
                let gpu = &self.comms[l].0;
                let event = gpu
                    .stream()
                    .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                    .map_err(|e| gpu.fail("recording an event after the NCCL exchange", e))?;
                events.push((gpu.clone(), event));
            }
            let mut state = self.watch.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.deadlines.issued(Instant::now(), Pending { events, awaited });
            Ok(())
        }
    }
}

impl<const D: usize> Domains<Gpu, D> {
    /// These domains with their messages between ranks moved by `transport` (collective: every
    /// rank calls it with the same choice). [`Transport::Auto`] takes NCCL where the build has
    /// the `nccl` feature, the world has several ranks and every subdomain of the run has a GPU of
    /// its own, else host-staged MPI (asking for [`Transport::Nccl`] says why in its `Err`). In one
    /// process, halo messages are peer copies whatever the choice; asking for NCCL there still
    /// makes its communicators, which then carry what they carry between ranks and peer copies do
    /// not: the minima and maxima reduced into held scalars (`Executor::reduce_into`), folded on
    /// the streams.
    pub fn with_transport(self, transport: Transport) -> Result<Self, LaunchError> {
        let single = self.world().size() == 1 && transport == Transport::Auto;
        if single || transport == Transport::HostStaged {
            return Ok(self);
        }
        #[cfg(feature = "nccl")]
        {
            let mut this = self;
            let made =
                links::NcclLinks::new(this.world(), this.execs(), this.local_range().start, this.decomposition().len());
            match (made, transport) {
                (Ok(l), _) => {
                    this.set_device_transport(std::sync::Arc::new(l));
                    Ok(this)
                }
                (Err(e), Transport::Nccl) => Err(e),
                (Err(e), _) => {
                    tracing::info!(target: "stencil::exchange", "transport auto: host-staged MPI ({e})");
                    Ok(this)
                }
            }
        }
        #[cfg(not(feature = "nccl"))]
        match transport {
            Transport::Nccl => Err(CudaError::Nccl {
                during: "choosing the transport".into(),
                detail: "this build has no NCCL: build stencil-runtime with the `nccl` feature".into(),
            }
            .into()),
            _ => Ok(self),
        }
    }
}
