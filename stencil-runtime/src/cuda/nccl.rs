//! NCCL between ranks ([`Transport::Nccl`]): halo messages sent device buffer to device buffer
//! with `ncclSend`/`ncclRecv`, issued on the subdomains' streams after their pack kernels and
//! before their unpack kernels, so a step never waits on the host for its halos.
//!
//! Every subdomain of the run is one NCCL rank (its global index) with its own communicator, so a
//! process may hold several subdomains, each on its own GPU. Setting up is collective over the
//! world: rank 0's unique id is broadcast through MPI, every process checks that NCCL loads and
//! that no two subdomains of the run share a GPU (NCCL refuses that), and the communicators are
//! made in one group.

use super::context::Gpu;
#[cfg(not(feature = "nccl"))]
use super::error::CudaError;
use crate::domain::{Domains, Transport};
use crate::error::LaunchError;

#[cfg(feature = "nccl")]
mod links {
    use super::super::context::Gpu;
    use super::super::error::CudaError;
    use crate::domain::{DeviceMessage, DeviceTransport, World};
    use crate::error::LaunchError;
    use cudarc::driver::{result as driver, sys as dsys};
    use cudarc::nccl::{result as nccl, sys};

    /// One NCCL communicator per local subdomain (see the module docs).
    pub(super) struct NcclLinks {
        comms: Vec<(Gpu, sys::ncclComm_t)>,
        /// Held from `ncclGroupStart` to `ncclGroupEnd` of an exchange.
        issuing: std::sync::Mutex<()>,
    }

    // SAFETY: NCCL communicators may be used from any thread, one thread at a time: the only calls
    // after set-up are `exchange`'s, each a whole group issued under `NcclLinks::issuing`, and
    // `drop`, which has `&mut self`.
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
            for (gpu, comm) in &self.comms {
                let _ = gpu.synchronize();
                let _ = gpu.bind();
                // SAFETY: the communicator was made by `comm_init_rank` and is destroyed once, after
                // the work queued on its stream.
                let _ = unsafe { nccl::comm_destroy(*comm) };
            }
        }
    }

    fn nccl_error(during: &str, e: nccl::NcclError) -> LaunchError {
        // SAFETY: ncclGetErrorString returns a static NUL-terminated string for any code.
        let text = unsafe { std::ffi::CStr::from_ptr(sys::ncclGetErrorString(e.0)) }.to_string_lossy().into_owned();
        CudaError::Nccl { during: during.to_string(), detail: format!("{:?}: {text}", e.0) }.into()
    }

    fn refuse(during: &str, detail: String) -> LaunchError {
        CudaError::Nccl { during: during.to_string(), detail }.into()
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
            // One group for all local communicators; the group is always closed, and what was made
            // is destroyed again when any part failed.
            let mut links = NcclLinks { comms: Vec::with_capacity(gpus.len()), issuing: std::sync::Mutex::new(()) };
            nccl::group_start().map_err(|e| nccl_error(during, e))?;
            let joined = gpus.iter().enumerate().try_for_each(|(i, g)| -> Result<(), LaunchError> {
                g.bind()?;
                let mut comm: sys::ncclComm_t = std::ptr::null_mut();
                // SAFETY: every subdomain of the run joins once, with the same id and its own rank;
                // the current context is its GPU's.
                unsafe { nccl::comm_init_rank(&mut comm, total as i32, unique, (first + i) as i32) }
                    .map_err(|e| nccl_error(during, e))?;
                links.comms.push((g.clone(), comm));
                Ok(())
            });
            let ended = nccl::group_end().map_err(|e| nccl_error(during, e));
            joined.and(ended.map(|_| ()))?;
            Ok(links)
        }
    }

    impl DeviceTransport for NcclLinks {
        fn exchange(&self, sends: &[DeviceMessage], recvs: &[DeviceMessage]) -> Result<(), LaunchError> {
            let key = |m: &&DeviceMessage| (m.local, m.peer, m.order);
            let mut sends: Vec<&DeviceMessage> = sends.iter().collect();
            let mut recvs: Vec<&DeviceMessage> = recvs.iter().collect();
            sends.sort_by_key(key);
            recvs.sort_by_key(key);
            let during = "exchanging halo messages";
            let _issuing = self.issuing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
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
            issued.and(ended.map(|_| ()))
        }
    }
}

impl<const D: usize> Domains<Gpu, D> {
    /// These domains with their messages between ranks moved by `transport` (collective: every
    /// rank calls it with the same choice). [`Transport::Auto`] takes NCCL where the build has
    /// the `nccl` feature, the world has several ranks and every subdomain of the run has a GPU of
    /// its own, else host-staged MPI (asking for [`Transport::Nccl`] says why in its `Err`). In one
    /// process, messages are peer copies whatever the choice.
    pub fn with_transport(self, transport: Transport) -> Result<Self, LaunchError> {
        if self.world().size() == 1 || transport == Transport::HostStaged {
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
