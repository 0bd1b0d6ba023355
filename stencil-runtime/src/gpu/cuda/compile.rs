//! Kernel compilation: NVRTC (chosen by the driver's version, see `nvrtc.rs`) straight to a
//! cubin for the device's architecture (the driver then loads it without a JIT step), or to PTX
//! where NVRTC does not know the device; behind an in-memory cache of loaded modules and the
//! on-disk [`DiskCache`] of compiled code.

use super::context::Gpu;
use super::error::{locate_error, ArgumentError, CudaError};
use super::kernel::Kernel;
use super::nvrtc::{Nvrtc, Target};
use crate::gpu::disk_cache::hash128;
use cudarc::driver::sys::CUresult;
use cudarc::driver::DriverError;
use cudarc::nvrtc::Ptx;
use std::ffi::CString;
use std::sync::PoisonError;
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
    /// `--gpu-architecture=sm_XY` (this device; `compute_XY` PTX for a device newer than NVRTC
    /// knows), `--std=c++17`, `-default-device`, then
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
            return Err(CudaError::InvalidArgument(ArgumentError::NulInEntry { entry: entry.to_string() }));
        }
        let nvrtc = Nvrtc::get()?;
        let (major, minor) = nvrtc.version;
        let target = nvrtc.target(self.compute_capability())?;
        let mut options =
            vec![format!("--gpu-architecture={}", target.arch()), "--std=c++17".into(), "-default-device".into()];
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
                    Some(disk) => disk.get_or_build(key, || compile(nvrtc, source, &options, &target, &mut log))?,
                    None => (compile(nvrtc, source, &options, &target, &mut log)?, false),
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

/// Compiles `source` with `options` to a cubin, or to PTX (NUL-terminated) for a
/// [`Target::Ptx`]; NVRTC's log goes to `log`.
fn compile(
    nvrtc: &Nvrtc,
    source: &str,
    options: &[String],
    target: &Target,
    log: &mut String,
) -> Result<Vec<u8>, CudaError> {
    let src = CString::new(source).map_err(|_| CudaError::InvalidArgument(ArgumentError::NulInSource))?;
    let ptx = matches!(target, Target::Ptx(_));
    nvrtc.compile(&src, PROGRAM_NAME, options, ptx, log).map_err(|(error, during)| match (during, error) {
        ("nvrtcCompileProgram", error) | ("nvrtcGetCUBIN" | "nvrtcGetPTX", error @ None) => {
            CudaError::Compile { line: locate_error(log, source), log: log.clone(), options: options.to_vec(), error }
        }
        (_, Some(error)) => CudaError::Nvrtc { during, error },
        (during, None) => CudaError::InvalidArgument(ArgumentError::NvrtcOptions { during: during.to_string() }),
    })
}

/// Compiles `source` for `arch` (e.g. `sm_90`) with the stencil kernel options plus `extra`,
/// without a GPU (NVRTC only), and returns NVRTC's log: what CI uses to check that every
/// generated kernel compiles, and (with `--ptxas-options=-v`) to report registers and spills.
pub fn compile_check(source: &str, arch: &str, extra: &[&str]) -> Result<String, CudaError> {
    let nvrtc = Nvrtc::get()?;
    let mut options = vec![format!("--gpu-architecture={arch}"), "--std=c++17".into(), "-default-device".into()];
    options.extend(KERNEL_OPTIONS.iter().chain(extra).map(|o| o.to_string()));
    let mut log = String::new();
    compile(nvrtc, source, &options, &Target::Cubin(arch.to_string()), &mut log)?;
    Ok(log)
}
