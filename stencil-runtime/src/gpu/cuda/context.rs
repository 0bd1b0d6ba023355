//! One GPU: its context, its streams, the per-device caches, the mapping of driver errors
//! (naming the last kernel on a fault), and event timing. Kernels are compiled in `compile.rs`,
//! launched in `launch.rs`, and device memory lives in `memory.rs`, all on top of this.

use super::error::{driver, is_kernel_fault, ArgumentError, CudaError};
use super::kernel::{Kernel, LaunchKey, Prepared, ReducePrepared};
use super::nvrtc::MIN_DRIVER_VERSION;
use crate::gpu::disk_cache::DiskCache;
use crate::gpu::tuning::{ShapeClass, TuneReport, TuneSettings};
use cudarc::driver::sys::{self, CUevent_flags, CUresult};
use cudarc::driver::{result, CudaContext, CudaModule, CudaStream, DriverError};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use stencil_codegen::printer::cuda::{Geometry, Strategy};

/// A handle on one CUDA device: a context, one stream that every copy, launch and timing of this
/// handle is issued on (so they run in issue order), and the kernel caches. Cheap to clone; all
/// clones share the stream and caches. Usable from any thread (the context is bound per call).
/// [`Gpu::fork_join`] lends handles on further streams of the same device, for work that may
/// overlap (e.g. one kernel per region of a decomposed range). The handle's own stream has the
/// device's highest priority and the lent streams its lowest, so work issued on the handle while
/// a lent stream computes (a halo exchange, boundary slabs) is scheduled first.
#[derive(Clone)]
pub struct Gpu {
    pub(crate) inner: Arc<GpuInner>,
    stream: Arc<CudaStream>,
}

pub(crate) struct GpuInner {
    pub(crate) ctx: Arc<CudaContext>,
    /// Streams lent by [`Gpu::fork_join`], created on first use and reused.
    side_streams: Mutex<Vec<Arc<CudaStream>>>,
    /// The priority of the side streams: the device's lowest (the main stream has its highest).
    side_priority: i32,
    name: String,
    capability: (u32, u32),
    /// Loaded modules by cache key (see `compile.rs`).
    pub(crate) modules: Mutex<HashMap<u128, Arc<CudaModule>>>,
    pub(crate) disk: Option<DiskCache>,
    /// Kernels prepared for stencil launches (see `executor.rs`).
    pub(crate) launches: Mutex<HashMap<LaunchKey, Arc<Prepared>>>,
    /// Contexts (by `Gpu::home`) this one has peer access to (see `peer.rs`).
    pub(crate) peers: Mutex<std::collections::HashMap<usize, bool>>,
    /// The runtime's own kernels (halo fill, message packing) by entry point,
    /// loaded on first use ([`Gpu::builtin_kernel`]).
    builtin: Mutex<HashMap<&'static str, Kernel>>,
    /// Entry point of the last kernel launched, to name it when a later call reports its fault.
    pub(crate) last_kernel: Mutex<Option<Arc<str>>>,
    /// Kernels prepared for reducing stencils, by (stencil, geometry) (see `reduce.rs`).
    pub(crate) reductions: Mutex<HashMap<(usize, Geometry), Arc<ReducePrepared>>>,
    /// Whether and how long stencil launches are tuned (see `tune.rs`).
    pub(crate) tune_settings: Mutex<TuneSettings>,
    /// Tuned choices by (stencil, shape class), with what tuning found (none where it could not
    /// tune: the default is kept without retrying).
    pub(crate) tuned: Mutex<HashMap<(usize, ShapeClass), Tuned>>,
    /// What two-pass launches need of each stencil's split, by stencil (see `two_pass.rs`).
    pub(crate) two_pass: Mutex<HashMap<usize, Option<Arc<TwoPassInfo>>>>,
    /// The scratch fields of two-pass launches, by (stream, bytes); freed on drop.
    pub(crate) scratch: Mutex<Scratch>,
    /// Page-locked host blocks (address, bytes) free for reads that do not wait
    /// ([`Gpu::take_pinned`]); freed on drop.
    pinned: Mutex<Vec<(usize, usize)>>,
}

impl Drop for GpuInner {
    fn drop(&mut self) {
        let scratch = std::mem::take(self.scratch.get_mut().unwrap_or_else(PoisonError::into_inner));
        let pinned = std::mem::take(self.pinned.get_mut().unwrap_or_else(PoisonError::into_inner));
        if scratch.is_empty() && pinned.is_empty() {
            return;
        }
        // SAFETY: the context is alive (held here); after the device is synchronised no queued
        // kernel or copy uses the scratch fields or the pinned blocks, each allocated by
        // `malloc_sync` or `malloc_host` and freed once.
        unsafe {
            self.ctx.record_err(result::ctx::set_current(self.ctx.cu_ctx()));
            self.ctx.record_err(result::ctx::synchronize());
            for ptr in scratch.into_values().flatten() {
                self.ctx.record_err(result::free_sync(ptr));
            }
            for (ptr, _) in pinned {
                self.ctx.record_err(result::free_host(ptr as *mut std::ffi::c_void));
            }
        }
    }
}

/// A tuned choice and what tuning found (none where it could not tune).
pub(crate) type Tuned = (Strategy, Option<Arc<TuneReport>>);

impl Gpu {
    /// Opens device `ordinal` with the disk cache the environment names (see
    /// [`DiskCache::from_env`]).
    pub fn new(ordinal: usize) -> Result<Gpu, CudaError> {
        Self::with_disk_cache(ordinal, DiskCache::from_env())
    }

    /// Opens device `ordinal` with the given disk cache, or none (e.g. to time cold compiles).
    pub fn with_disk_cache(ordinal: usize, disk: Option<DiskCache>) -> Result<Gpu, CudaError> {
        let tune_settings =
            TuneSettings::from_env().map_err(|e| CudaError::InvalidArgument(ArgumentError::Tuning(e)))?;
        let count = Self::count()?;
        if ordinal >= count {
            return Err(CudaError::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| driver("creating the CUDA context", e))?;
        ctx.bind_to_thread().map_err(|e| driver("binding the CUDA context", e))?;
        // The main stream gets the device's highest priority and the side streams its lowest:
        // the halo exchange (pack, copy, unpack) and the binder's boundary slabs, issued on the
        // main stream, then start ahead of the inner region's blocks queued on a side stream.
        let (lowest, highest) = cudarc::driver::result::stream::get_priority_range()
            .map_err(|e| driver("reading the stream priority range", e))?;
        let stream = ctx.new_stream_with_priority(highest).map_err(|e| driver("creating a stream", e))?;
        let name = ctx.name().map_err(|e| driver("reading the device name", e))?;
        let (major, minor) = ctx.compute_capability().map_err(|e| driver("reading the compute capability", e))?;
        Ok(Gpu {
            stream,
            inner: Arc::new(GpuInner {
                ctx,
                side_streams: Mutex::new(Vec::new()),
                side_priority: lowest,
                name,
                capability: (major as u32, minor as u32),
                modules: Mutex::new(HashMap::new()),
                disk,
                launches: Mutex::new(HashMap::new()),
                builtin: Mutex::new(HashMap::new()),
                peers: Mutex::new(std::collections::HashMap::new()),
                last_kernel: Mutex::new(None),
                reductions: Mutex::new(HashMap::new()),
                tune_settings: Mutex::new(tune_settings),
                tuned: Mutex::new(HashMap::new()),
                two_pass: Mutex::new(HashMap::new()),
                scratch: Mutex::new(HashMap::new()),
                pinned: Mutex::new(Vec::new()),
            }),
        })
    }

    /// A page-locked host block (address, bytes) of at least `bytes` bytes, for a copy that
    /// the host collects later: the smallest free one that fits, else a new one (a power of
    /// two, at least 4 KiB). Hand it back with [`Gpu::give_pinned`] once no copy uses it.
    pub(crate) fn take_pinned(&self, bytes: usize) -> Result<(usize, usize), CudaError> {
        let mut free = self.inner.pinned.lock().unwrap_or_else(PoisonError::into_inner);
        let best = free.iter().enumerate().filter(|(_, b)| b.1 >= bytes).min_by_key(|(_, b)| b.1).map(|(i, _)| i);
        if let Some(i) = best {
            return Ok(free.swap_remove(i));
        }
        drop(free);
        let size = bytes.max(4096).next_power_of_two();
        self.bind()?;
        // SAFETY: plain allocation of page-locked memory, freed when the context's last handle
        // is dropped (`GpuInner::drop`).
        let ptr = unsafe { result::malloc_host(size, 0) }.map_err(|e| self.fail("allocating pinned host memory", e))?;
        Ok((ptr as usize, size))
    }

    /// Returns a block of [`Gpu::take_pinned`] for reuse; no queued copy may still use it.
    pub(crate) fn give_pinned(&self, block: (usize, usize)) {
        self.inner.pinned.lock().unwrap_or_else(PoisonError::into_inner).push(block);
    }

    /// Number of CUDA devices; `Ok(0)` when a driver is installed but sees no device.
    pub fn count() -> Result<usize, CudaError> {
        // SAFETY: only tries to dlopen the driver library.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::NoDriver { detail: "libcuda.so was not found".into() });
        }
        match result::init() {
            Err(DriverError(CUresult::CUDA_ERROR_NO_DEVICE)) => return Ok(0),
            r => r.map_err(|e| driver("initialising the CUDA driver (cuInit)", e))?,
        }
        let version = driver_version()?;
        if version < MIN_DRIVER_VERSION {
            return Err(CudaError::DriverTooOld { version, required: MIN_DRIVER_VERSION });
        }
        let count = result::device::get_count().map_err(|e| driver("counting devices", e))?;
        Ok(count.max(0) as usize)
    }

    /// The device's name, e.g. `NVIDIA H200`.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The device's compute capability `(major, minor)`, e.g. `(9, 0)`.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.inner.capability
    }

    /// The dynamic shared memory one block may opt in to, in bytes (227 KiB on sm_90).
    pub(crate) fn max_shared_per_block(&self) -> Result<u32, CudaError> {
        let attr = sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN;
        let bytes = self.inner.ctx.attribute(attr).map_err(|e| driver("reading the shared memory per block", e))?;
        Ok(bytes.max(0) as u32)
    }

    /// The real architecture kernels are compiled for, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        let (major, minor) = self.inner.capability;
        format!("sm_{major}{minor}")
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.ctx.ordinal()
    }

    /// Free and total device memory in bytes, e.g. to size a benchmark grid to what fits.
    pub fn memory_info(&self) -> Result<(usize, usize), CudaError> {
        self.bind()?;
        result::mem_get_info().map_err(|e| self.fail("reading the free memory", e))
    }

    /// The disk cache directory in use, if any.
    pub fn disk_cache_dir(&self) -> Option<&Path> {
        self.inner.disk.as_ref().map(DiskCache::dir)
    }

    /// Whether `other` is a handle on the same stream of the same context.
    pub(crate) fn same_stream(&self, other: &Gpu) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner) && Arc::ptr_eq(&self.stream, &other.stream)
    }

    /// Waits until everything issued on this handle's stream has finished; reports a kernel
    /// fault as [`CudaError::KernelFault`] naming the last kernel launched.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.refuse_while_recording("synchronize")?;
        self.stream.synchronize().map_err(|e| self.fail("synchronizing the stream", e))
    }

    /// Whether this handle's stream is being recorded (a [`crate::Recorded`] step is being
    /// captured).
    pub(crate) fn is_recording(&self) -> Result<bool, CudaError> {
        match self.stream.capture_status() {
            Ok(status) => Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE),
            Err(e) => Err(self.fail("reading the stream's capture status", e)),
        }
    }

    /// An error when this handle's stream is being recorded (a [`crate::Recorded`] step is
    /// being captured): `what` (a copy to or from the host, a synchronisation) cannot be part
    /// of a recording, and issuing it would invalidate the capture.
    pub(crate) fn refuse_while_recording(&self, what: &str) -> Result<(), CudaError> {
        match self.stream.capture_status() {
            Ok(sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE) => Ok(()),
            Ok(_) => Err(CudaError::InvalidArgument(ArgumentError::WhileRecording {
                what: what.to_string(),
                gpu: format!("{self:?}"),
            })),
            Err(e) => Err(self.fail("reading the stream's capture status", e)),
        }
    }

    /// One of the runtime's own kernels (`entry` of `source`), compiled and loaded on first use.
    pub(crate) fn builtin_kernel(&self, source: &str, entry: &'static str) -> Result<Kernel, CudaError> {
        if let Some(k) = self.inner.builtin.lock().unwrap_or_else(PoisonError::into_inner).get(entry) {
            return Ok(k.clone());
        }
        let kernel = self.kernel(source, entry)?;
        self.inner.builtin.lock().unwrap_or_else(PoisonError::into_inner).insert(entry, kernel.clone());
        Ok(kernel)
    }

    /// Makes this device's context current on the calling thread (raw driver calls need it).
    pub(crate) fn bind(&self) -> Result<(), CudaError> {
        self.inner.ctx.bind_to_thread().map_err(|e| self.fail("binding the CUDA context", e))
    }

    /// The stream every operation of this handle is issued on.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The raw stream every operation of this handle is issued on.
    pub(crate) fn cu_stream(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }

    /// Maps a driver error raised while doing `what`; a kernel fault names the last kernel.
    pub(crate) fn fail(&self, what: &str, e: DriverError) -> CudaError {
        if !is_kernel_fault(e) {
            return driver(what, e);
        }
        let last = self.inner.last_kernel.lock().unwrap_or_else(|p| p.into_inner()).clone();
        CudaError::KernelFault {
            kernel: last.as_deref().unwrap_or("<none launched>").to_string(),
            during: what.to_string(),
            error: e,
        }
    }

    /// Runs `work` (which must issue its GPU work on this handle, e.g. launches) between two
    /// events recorded on the stream, waits, and returns its result with the device time in
    /// milliseconds between the events.
    pub fn time_ms<R>(&self, work: impl FnOnce() -> Result<R, CudaError>) -> Result<(R, f64), CudaError> {
        let ctx = &self.inner.ctx;
        let event =
            || ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| self.fail("creating an event", e));
        let (start, end) = (event()?, event()?);
        start.record(&self.stream).map_err(|e| self.fail("recording an event", e))?;
        let value = work()?;
        end.record(&self.stream).map_err(|e| self.fail("recording an event", e))?;
        let ms = start.elapsed_ms(&end).map_err(|e| self.fail("timing with events", e))?;
        Ok((value, ms as f64))
    }

    /// Runs `work` with `n` handles on streams of their own, each starting after everything
    /// issued on this handle so far; work issued on this handle afterwards starts after all of
    /// theirs (fork, then join, in stream order: the host does not wait). Kernels on different
    /// handles may run concurrently, so they must not write what another one reads or writes,
    /// e.g. the regions of [`Loop::split_boundary`](crate::Loop::split_boundary). The join is
    /// issued even when `work` fails. The streams are created once and reused.
    pub fn fork_join<R, E: From<CudaError>>(
        &self,
        n: usize,
        work: impl FnOnce(&[Gpu]) -> Result<R, E>,
    ) -> Result<R, E> {
        let streams = self.side_streams(n)?;
        let no_timing = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);
        let forked = self.stream.record_event(no_timing).map_err(|e| self.fail("recording a fork event", e))?;
        let handles = streams
            .into_iter()
            .map(|stream| {
                stream.wait(&forked).map_err(|e| self.fail("waiting on a fork event", e))?;
                Ok(Gpu { inner: self.inner.clone(), stream })
            })
            .collect::<Result<Vec<_>, CudaError>>()?;
        let value = work(&handles);
        for side in &handles {
            let done = side.stream.record_event(no_timing).map_err(|e| self.fail("recording a join event", e))?;
            self.stream.wait(&done).map_err(|e| self.fail("waiting on a join event", e))?;
        }
        value
    }

    /// The first `n` side streams, creating the missing ones.
    fn side_streams(&self, n: usize) -> Result<Vec<Arc<CudaStream>>, CudaError> {
        let mut pool = self.inner.side_streams.lock().unwrap_or_else(|p| p.into_inner());
        while pool.len() < n {
            let stream = self.inner.ctx.new_stream_with_priority(self.inner.side_priority);
            pool.push(stream.map_err(|e| driver("creating a stream", e))?);
        }
        Ok(pool[..n].to_vec())
    }
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gpu({}: {}, {})", self.ordinal(), self.name(), self.arch())
    }
}

/// The driver's CUDA version (e.g. 13000), after `cuInit`.
pub(crate) fn driver_version() -> Result<i32, CudaError> {
    let mut version = 0;
    // SAFETY: writes one int.
    unsafe { sys::cuDriverGetVersion(&mut version) }.result().map_err(|e| driver("cuDriverGetVersion", e))?;
    Ok(version)
}

/// What a launch needs of a stencil's split: per first pass, the box of offsets over which it
/// writes its values and the offsets at which it then reads the fields; the element size of
/// each scratch field; whether there is a point pass. Cached per stencil.
pub(crate) struct TwoPassInfo {
    pub(crate) passes: Vec<PassReach>,
    pub(crate) elem_bytes: Vec<usize>,
    pub(crate) point: bool,
}

/// One first pass's box (`lo`, `hi`) and reads (`reads_lo`, `reads_hi`), per stencil axis.
pub(crate) struct PassReach {
    pub(crate) lo: [i32; 3],
    pub(crate) hi: [i32; 3],
    pub(crate) reads_lo: [i32; 3],
    pub(crate) reads_hi: [i32; 3],
}

/// Scratch fields by (stream, bytes): device addresses, freed when the device is dropped.
pub(crate) type Scratch = HashMap<(usize, usize), Vec<u64>>;
