//! Kernel compilation: NVRTC straight to a cubin for the device's architecture (the driver
//! then loads it without a JIT step), behind an in-memory cache of loaded modules and the
//! on-disk [`DiskCache`] of cubins.

use super::context::Gpu;
use super::error::{locate_error, CudaError};
use super::kernel::Kernel;
use crate::disk_cache::hash128;
use cudarc::driver::sys::CUresult;
use cudarc::driver::DriverError;
use cudarc::nvrtc::{self, Ptx};
use std::ffi::CString;
use std::sync::{OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// Name NVRTC gives the source in its log (`stencil.cu(LINE): error: ...`).
const PROGRAM_NAME: &std::ffi::CStr = c"stencil.cu";

/// NVRTC options of every stencil kernel. `--fmad=false` keeps `a * b + c` two roundings, as
/// the CPU nest computes it, so GPU and CPU results agree bit for bit where the arithmetic is
/// the same; the kernels are memory-bound, so fused multiply-adds would buy nothing measurable.
pub const KERNEL_OPTIONS: &[&str] = &["--fmad=false"];

/// Where a kernel's module came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheSource {
    /// Already loaded on this `Gpu`.
    Memory,
    /// A cubin from the disk cache, loaded.
    Disk,
    /// Compiled by NVRTC (and stored in the disk cache), loaded.
    Compiled,
}

/// What getting a kernel cost, for benchmarks (cold compile vs cached load).
#[derive(Clone, Debug)]
pub struct CompileStats {
    /// Where the module came from.
    pub origin: CacheSource,
    /// Wall time of the whole call (hashing, compiling or reading, loading, lookup).
    pub elapsed: Duration,
    /// The cache key; the disk entry is `<cache dir>/<key as 32 hex digits>.cubin`.
    pub key: u128,
    /// NVRTC's log when compiled (warnings, `--ptxas-options=-v` output), else empty.
    pub log: String,
}

impl Gpu {
    /// The kernel `entry` (declared `extern "C" __global__`) of CUDA C++ `source`, compiled with
    /// the default options (see [`Gpu::kernel_with_stats`]). Compiling takes tens of
    /// milliseconds and even a cache hit hashes the source: get a kernel once and keep it.
    pub fn kernel(&self, source: &str, entry: &str) -> Result<Kernel, CudaError> {
        self.kernel_with_stats(source, entry, &[]).map(|(kernel, _)| kernel)
    }

    /// The kernel `entry` of `source`, with where it came from and what it cost. NVRTC options:
    /// `--gpu-architecture=sm_XY` (this device), `--std=c++17`, `-default-device`, then
    /// `extra_options` (e.g. `--ftz=true`, `--use_fast_math`, `--ptxas-options=-v`). Modules
    /// are cached in memory and cubins on disk under a hash of source, options (architecture
    /// included) and NVRTC version.
    pub fn kernel_with_stats(
        &self,
        source: &str,
        entry: &str,
        extra_options: &[&str],
    ) -> Result<(Kernel, CompileStats), CudaError> {
        let start = Instant::now();
        if entry.contains('\0') {
            return Err(CudaError::InvalidArgument(format!("kernel entry {entry:?} contains a NUL byte")));
        }
        let (major, minor) = nvrtc_version().ok_or(CudaError::NoNvrtc)?;
        let mut options =
            vec![format!("--gpu-architecture={}", self.arch()), "--std=c++17".into(), "-default-device".into()];
        options.extend(extra_options.iter().map(|o| o.to_string()));
        let version = [major.to_le_bytes(), minor.to_le_bytes()].concat();
        let mut parts: Vec<&[u8]> = vec![b"stencil-cubin", source.as_bytes(), &version];
        parts.extend(options.iter().map(|o| o.as_bytes()));
        let key = hash128(&parts);

        self.bind()?;
        let modules = &self.inner.modules;
        let cached = modules.lock().unwrap_or_else(PoisonError::into_inner).get(&key).cloned();
        let mut log = String::new();
        let (module, origin) = match cached {
            Some(module) => (module, CacheSource::Memory),
            None => {
                let (cubin, from_disk) = match &self.inner.disk {
                    Some(disk) => disk.get_or_build(key, || compile_cubin(source, &options, &mut log))?,
                    None => (compile_cubin(source, &options, &mut log)?, false),
                };
                let module = self
                    .inner
                    .ctx
                    .load_module(Ptx::from_binary(cubin))
                    .map_err(|e| self.fail("loading a compiled module", e))?;
                modules.lock().unwrap_or_else(PoisonError::into_inner).insert(key, module.clone());
                (module, if from_disk { CacheSource::Disk } else { CacheSource::Compiled })
            }
        };
        let function = module.load_function(entry).map_err(|e| match e {
            DriverError(CUresult::CUDA_ERROR_NOT_FOUND) => CudaError::MissingEntry { entry: entry.to_string() },
            e => self.fail("looking up a kernel", e),
        })?;
        let kernel = Kernel::new(function, entry);
        let elapsed = start.elapsed();
        tracing::debug!(target: "stencil::compile", entry, ?origin, ms = elapsed.as_secs_f64() * 1e3, key = %format_args!("{key:032x}"), "kernel ready");
        Ok((kernel, CompileStats { origin, elapsed, key, log }))
    }

    /// Forgets the modules loaded by this handle (kernels already handed out stay valid), so
    /// the next [`Gpu::kernel`] reads the disk cache or compiles: for timing those paths.
    pub fn clear_memory_cache(&self) {
        self.inner.modules.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }
}

/// NVRTC's version, or `None` when libnvrtc cannot be loaded.
fn nvrtc_version() -> Option<(i32, i32)> {
    static VERSION: OnceLock<Option<(i32, i32)>> = OnceLock::new();
    *VERSION.get_or_init(|| {
        // SAFETY: only tries to dlopen the library.
        if !unsafe { nvrtc::sys::is_culib_present() } {
            return None;
        }
        let (mut major, mut minor) = (0, 0);
        // SAFETY: writes two ints.
        unsafe { nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }.result().ok()?;
        Some((major, minor))
    })
}

/// Compiles `source` with `options` to a cubin; NVRTC's log goes to `log`.
fn compile_cubin(source: &str, options: &[String], log: &mut String) -> Result<Vec<u8>, CudaError> {
    let nvrtc_error = |during: &'static str, error: nvrtc::result::NvrtcError| CudaError::Nvrtc { during, error };
    let src =
        CString::new(source).map_err(|_| CudaError::InvalidArgument("kernel source contains a NUL byte".into()))?;
    struct Program(nvrtc::sys::nvrtcProgram);
    impl Drop for Program {
        fn drop(&mut self) {
            // SAFETY: created by `create_program`, destroyed once.
            let _ = unsafe { nvrtc::result::destroy_program(self.0) };
        }
    }
    let program = Program(
        nvrtc::result::create_program(&src, Some(PROGRAM_NAME)).map_err(|e| nvrtc_error("nvrtcCreateProgram", e))?,
    );
    // SAFETY (all calls below): `program` is a live program; `src` outlives it.
    let compiled = unsafe { nvrtc::result::compile_program(program.0, options) };
    if let Ok(raw) = unsafe { nvrtc::result::get_program_log(program.0) } {
        let bytes: Vec<u8> = raw.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
        *log = String::from_utf8_lossy(&bytes).into_owned();
    }
    compiled.map_err(|e| CudaError::Compile {
        line: locate_error(log, source),
        log: log.clone(),
        options: options.to_vec(),
        error: Some(e),
    })?;
    let mut size = 0usize;
    unsafe { nvrtc::sys::nvrtcGetCUBINSize(program.0, &mut size) }
        .result()
        .map_err(|e| nvrtc_error("nvrtcGetCUBINSize", e))?;
    if size == 0 {
        return Err(CudaError::Compile { log: log.clone(), line: None, options: options.to_vec(), error: None });
    }
    let mut cubin = vec![0u8; size];
    unsafe { nvrtc::sys::nvrtcGetCUBIN(program.0, cubin.as_mut_ptr().cast()) }
        .result()
        .map_err(|e| nvrtc_error("nvrtcGetCUBIN", e))?;
    Ok(cubin)
}

/// Compiles `source` for `arch` (e.g. `sm_90`) with the stencil kernel options plus `extra`,
/// without a GPU (NVRTC only), and returns NVRTC's log: what CI uses to check that every
/// generated kernel compiles, and (with `--ptxas-options=-v`) to report registers and spills.
pub fn compile_check(source: &str, arch: &str, extra: &[&str]) -> Result<String, CudaError> {
    nvrtc_version().ok_or(CudaError::NoNvrtc)?;
    let mut options = vec![format!("--gpu-architecture={arch}"), "--std=c++17".into(), "-default-device".into()];
    options.extend(KERNEL_OPTIONS.iter().chain(extra).map(|o| o.to_string()));
    let mut log = String::new();
    compile_cubin(source, &options, &mut log)?;
    Ok(log)
}
