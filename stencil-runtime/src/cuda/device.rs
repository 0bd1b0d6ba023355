//! One GPU: its context and stream, kernel launches, and event timing.

use super::cache::DiskCache;
use super::compile::Kernel;
use super::error::{describe, driver, is_kernel_fault, CudaError};
use super::field::DeviceAlloc;
use cudarc::driver::sys::{self, CUevent_flags, CUfunction_attribute, CUresult};
use cudarc::driver::{result, CudaContext, CudaModule, CudaStream, DriverError};
use std::collections::HashMap;
use std::ffi::c_void;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Dynamic shared memory a kernel may use without opting in through a function attribute.
const DEFAULT_DYNAMIC_SHARED: u32 = 48 * 1024;
/// The oldest driver this build can use (`cuda-13000` in cudarc's features).
const MIN_DRIVER_VERSION: i32 = 13000;

/// A handle on one CUDA device: a context, one stream that every copy, launch and timing of this
/// handle is issued on (so they run in issue order), and the kernel caches. Cheap to clone; all
/// clones share the stream and caches. Usable from any thread (the context is bound per call).
/// [`Gpu::fork_join`] lends handles on further streams of the same device, for work that may
/// overlap (e.g. one kernel per region of a decomposed range).
#[derive(Clone)]
pub struct Gpu {
    pub(crate) inner: Arc<GpuInner>,
    stream: Arc<CudaStream>,
}

pub(crate) struct GpuInner {
    pub(crate) ctx: Arc<CudaContext>,
    /// Streams lent by [`Gpu::fork_join`], created on first use and reused.
    side_streams: Mutex<Vec<Arc<CudaStream>>>,
    name: String,
    capability: (u32, u32),
    /// Loaded modules by cache key (see `compile.rs`).
    pub(crate) modules: Mutex<HashMap<u128, Arc<CudaModule>>>,
    pub(crate) disk: Option<DiskCache>,
    /// Kernels prepared for stencil launches (see `executor.rs`).
    pub(crate) launches: Mutex<HashMap<super::executor::LaunchKey, Arc<super::executor::Prepared>>>,
    /// Entry point of the last kernel launched, to name it when a later call reports its fault.
    last_kernel: Mutex<Option<Arc<str>>>,
}

/// Grid and block sizes and dynamic shared memory of a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchDims {
    /// Blocks per axis (x, y, z).
    pub grid: [u32; 3],
    /// Threads per block per axis (x, y, z).
    pub block: [u32; 3],
    /// Dynamic shared memory per block in bytes (above 48 KiB the launch opts in for the kernel).
    pub shared_bytes: u32,
}

impl LaunchDims {
    /// The smallest grid of `block`-sized blocks covering `threads` threads per axis, with no
    /// dynamic shared memory (an axis of 0 threads gives 0 blocks: a launch that does nothing).
    pub fn covering(threads: [usize; 3], block: [u32; 3]) -> Self {
        let grid = std::array::from_fn(|a| threads[a].div_ceil(block[a].max(1) as usize) as u32);
        LaunchDims { grid, block, shared_bytes: 0 }
    }
}

/// One kernel argument, passed by value as the kernel's parameter of that C type. Booleans are
/// passed as `I32`; device fields as `Ptr` (see `DeviceField::arg`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KernelArg<'a> {
    /// `float`.
    F32(f32),
    /// `double`.
    F64(f64),
    /// `int`.
    I32(i32),
    /// `unsigned int`.
    U32(u32),
    /// `long long`.
    I64(i64),
    /// A device pointer (`T*`), e.g. the start of a device field's storage.
    Ptr(u64),
    /// A struct passed by value, as the bytes of its C layout.
    Bytes(&'a [u8]),
}

impl KernelArg<'_> {
    /// The address of the value, as `cuLaunchKernel` wants each parameter.
    fn as_param(&self) -> *mut c_void {
        match self {
            KernelArg::F32(v) => v as *const f32 as *mut c_void,
            KernelArg::F64(v) => v as *const f64 as *mut c_void,
            KernelArg::I32(v) => v as *const i32 as *mut c_void,
            KernelArg::U32(v) => v as *const u32 as *mut c_void,
            KernelArg::I64(v) => v as *const i64 as *mut c_void,
            KernelArg::Ptr(v) => v as *const u64 as *mut c_void,
            KernelArg::Bytes(b) => b.as_ptr() as *mut c_void,
        }
    }
}

impl Gpu {
    /// Opens device `ordinal` with the disk cache the environment names (see
    /// [`DiskCache::from_env`]).
    pub fn new(ordinal: usize) -> Result<Gpu, CudaError> {
        Self::with_disk_cache(ordinal, DiskCache::from_env())
    }

    /// Opens device `ordinal` with the given disk cache, or none (e.g. to time cold compiles).
    pub fn with_disk_cache(ordinal: usize, disk: Option<DiskCache>) -> Result<Gpu, CudaError> {
        let count = Self::count()?;
        if ordinal >= count {
            return Err(CudaError::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| driver("creating the CUDA context", e))?;
        let stream = ctx.new_stream().map_err(|e| driver("creating a stream", e))?;
        let name = ctx.name().map_err(|e| driver("reading the device name", e))?;
        let (major, minor) = ctx.compute_capability().map_err(|e| driver("reading the compute capability", e))?;
        Ok(Gpu {
            stream,
            inner: Arc::new(GpuInner {
                ctx,
                side_streams: Mutex::new(Vec::new()),
                name,
                capability: (major as u32, minor as u32),
                modules: Mutex::new(HashMap::new()),
                disk,
                launches: Mutex::new(HashMap::new()),
                last_kernel: Mutex::new(None),
            }),
        })
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
        let mut version = 0;
        // SAFETY: writes one int.
        unsafe { sys::cuDriverGetVersion(&mut version) }.result().map_err(|e| driver("cuDriverGetVersion", e))?;
        if version < MIN_DRIVER_VERSION {
            return Err(CudaError::NoDriver {
                detail: format!(
                    "the driver supports CUDA {}.{}, this build needs 13.0",
                    version / 1000,
                    version % 1000 / 10
                ),
            });
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

    /// Waits until everything issued on this handle's stream has finished; reports a kernel
    /// fault as [`CudaError::Launch`] naming the last kernel launched.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.refuse_while_recording("synchronize")?;
        self.stream.synchronize().map_err(|e| self.fail("synchronizing the stream", e))
    }

    /// An error when this handle's stream is being recorded (a [`crate::Recorded`] step is
    /// being captured): `what` (a copy to or from the host, a synchronisation) cannot be part
    /// of a recording, and issuing it would invalidate the capture.
    pub(crate) fn refuse_while_recording(&self, what: &str) -> Result<(), CudaError> {
        match self.stream.capture_status() {
            Ok(sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE) => Ok(()),
            Ok(_) => Err(CudaError::InvalidArgument(format!(
                "{what} on {self:?} while a step is being recorded: a recording holds device work only"
            ))),
            Err(e) => Err(self.fail("reading the stream's capture status", e)),
        }
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
        CudaError::Launch {
            kernel: last.as_deref().unwrap_or("<none launched>").to_string(),
            message: format!(
                "faulted while running: {} (reported by {what}); the CUDA context is unusable now, \
                 restart the process",
                describe(e)
            ),
        }
    }

    /// Launches `kernel` on this handle's stream with `args` in the order of its parameters;
    /// returns once the launch is queued (launch errors are checked, running errors surface at
    /// the next synchronising call). Pointers in `args` must stay allocated until the kernel has
    /// run: dropping a `DeviceField` waits for the stream, so it is enough that fields outlive
    /// this call. The kernel must come from this handle's [`Gpu::kernel`]. A grid with a 0 axis
    /// (an empty range) launches nothing and returns `Ok`; a block with a 0 axis is an error.
    ///
    /// # Safety
    ///
    /// The kernel reads and writes whatever its arguments point at: `args` must match the
    /// kernel's parameters in number and type, and every address it accesses with these
    /// arguments and `dims` must lie in live device memory of this context. Stencil launches
    /// through [`Executor::run`](crate::Executor::run) check all of that; this is the raw path.
    pub unsafe fn launch(&self, kernel: &Kernel, dims: LaunchDims, args: &[KernelArg]) -> Result<(), CudaError> {
        let LaunchDims { grid, block, shared_bytes } = dims;
        let launch_error = |message: String| CudaError::Launch { kernel: kernel.entry().to_string(), message };
        if block.contains(&0) {
            return Err(launch_error(format!("block {block:?} has no threads")));
        }
        if grid.contains(&0) {
            return Ok(());
        }
        self.bind()?;
        if shared_bytes > DEFAULT_DYNAMIC_SHARED && kernel.dynamic_shared_opted_in() < shared_bytes {
            let attr = CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            kernel.function().set_attribute(attr, shared_bytes as i32).map_err(|e| {
                launch_error(format!("cannot use {shared_bytes} bytes of dynamic shared memory: {}", describe(e)))
            })?;
            kernel.set_dynamic_shared_opted_in(shared_bytes);
        }
        let mut params: Vec<*mut c_void> = args.iter().map(KernelArg::as_param).collect();
        // SAFETY: the function is loaded in this context; each parameter points at a value of
        // the kernel's parameter type (the caller's contract), alive for this call, and the
        // driver copies parameter values before returning.
        #[allow(unused_unsafe)]
        let launched = unsafe {
            result::launch_kernel(
                kernel.function().cu_function(),
                (grid[0], grid[1], grid[2]),
                (block[0], block[1], block[2]),
                shared_bytes,
                self.cu_stream(),
                &mut params,
            )
        };
        match launched {
            Err(e) if is_kernel_fault(e) => return Err(self.fail("a kernel launch", e)),
            Err(e) => {
                let hint = match e.0 {
                    CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => "; use smaller blocks or fewer registers",
                    CUresult::CUDA_ERROR_INVALID_VALUE => "; check the dimensions against the device limits",
                    _ => "",
                };
                return Err(launch_error(format!(
                    "launch failed: {} (grid {grid:?}, block {block:?}, {shared_bytes} bytes shared){hint}",
                    describe(e)
                )));
            }
            Ok(()) => {}
        }
        *self.inner.last_kernel.lock().unwrap_or_else(|p| p.into_inner()) = Some(kernel.entry_arc());
        Ok(())
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
            pool.push(self.inner.ctx.new_stream().map_err(|e| driver("creating a stream", e))?);
        }
        Ok(pool[..n].to_vec())
    }

    /// Device-to-device copy bandwidth in GB/s (10⁹ bytes, read + written, per second): the
    /// median of `reps` timed copies of `bytes` bytes after one warm-up copy. The reference a
    /// memory-bound kernel's throughput is compared with.
    pub fn copy_bandwidth_gbs(&self, bytes: usize, reps: usize) -> Result<f64, CudaError> {
        if bytes == 0 || reps == 0 {
            return Err(CudaError::InvalidArgument(format!(
                "copy_bandwidth_gbs needs bytes > 0 and reps > 0, got {bytes}, {reps}"
            )));
        }
        let src = DeviceAlloc::new(self, bytes, || "the copy-bandwidth source".into())?;
        let dst = DeviceAlloc::new(self, bytes, || "the copy-bandwidth destination".into())?;
        let copy = || {
            // SAFETY: both allocations hold `bytes` bytes and outlive the stream's use of them.
            unsafe { result::memcpy_dtod_async(dst.ptr(), src.ptr(), bytes, self.cu_stream()) }
                .map_err(|e| self.fail("a device-to-device copy", e))
        };
        self.bind()?;
        copy()?;
        self.synchronize()?;
        let mut ms = (0..reps).map(|_| self.time_ms(copy).map(|(_, ms)| ms)).collect::<Result<Vec<_>, _>>()?;
        ms.sort_by(f64::total_cmp);
        let median = if reps % 2 == 1 { ms[reps / 2] } else { (ms[reps / 2 - 1] + ms[reps / 2]) / 2.0 };
        Ok(2.0 * bytes as f64 / (median * 1e-3) / 1e9)
    }
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gpu({}: {}, {})", self.ordinal(), self.name(), self.arch())
    }
}
