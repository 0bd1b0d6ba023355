//! The CUDA runtime (cargo feature `cuda`): devices, device fields, NVRTC-compiled kernels and
//! launches, on cudarc's driver API. libcuda and libnvrtc are loaded at run time, so this builds
//! on machines without CUDA; a driver for CUDA 12.0 or newer is needed to run, with NVRTC of
//! the driver's CUDA major version or an older one down to 12 (see [`nvrtc_info`];
//! `STENCIL_NVRTC` forces a library).
//!
//! - [`Gpu`]: one device, with one stream on which every copy, launch and timing of the handle
//!   is issued, so they execute in issue order. Clones share it.
//! - [`DeviceField`]: plain `cuMemAlloc` device memory (not managed memory) with the host
//!   field's [`Shape`](crate::Shape), so a kernel indexes it with the same offsets.
//! - [`Gpu::kernel`]: NVRTC compiles CUDA C++ to a cubin for the device (`sm_XY`), cached in
//!   memory per `Gpu` and on disk in `$STENCIL_CACHE_DIR`, else `$XDG_CACHE_HOME/stencil-dsl`,
//!   else `$HOME/.cache/stencil-dsl` (see [`DiskCache`]). No math options are on by default
//!   (flush-to-zero included): pass them through [`Gpu::kernel_with_stats`].
//! - [`Gpu`] is an [`Executor`](crate::Executor): stencil launches, halo fills and recorded
//!   steps (CUDA graphs) go through it; the raw, `unsafe` [`Gpu::launch`] takes [`LaunchDims`]
//!   and [`KernelArg`]s; [`Gpu::time_ms`] and
//!   [`Gpu::copy_bandwidth_gbs`] for benchmarks.
//!
//! ```no_run
//! use stencil_runtime::cuda::{Gpu, KernelArg, LaunchDims};
//! use stencil_runtime::{Field3, Shape3};
//! # fn main() -> Result<(), stencil_runtime::cuda::CudaError> {
//! let gpu = Gpu::new(0)?;
//! let shape = Shape3::new([64, 64, 64]).halo(1);
//! let a = gpu.upload(&Field3::<f32>::filled(shape, 1.0))?;
//! let b = gpu.alloc::<f32, 3>(shape)?;
//! let k = gpu.kernel("extern \"C\" __global__ void f(const float* a, float* b) { /* ... */ }", "f")?;
//! // SAFETY: the kernel takes two pointers and stays inside the fields.
//! unsafe { gpu.launch(&k, LaunchDims::covering(shape.extent(), [32, 4, 2]), &[a.arg(), b.arg()])? };
//! let result = b.download()?;
//! # Ok(()) }
//! ```

// One-way dependencies: error, kernel <- nvrtc <- context <- compile, launch <- memory <- halo, peer <- message,
// reduce, tune, boxes, add_at <- executor <- steps.
mod add_at;
mod boxes;
mod compile;
mod context;
mod error;
mod executor;
mod halo;
mod held;
mod kernel;
mod launch;
mod memory;
pub(crate) use memory::DeviceAlloc;
mod nvrtc;
mod reduce;
mod steps;
mod tune;
mod two_pass;

/// The cudarc types that [`CudaError`] keeps: the driver's and NVRTC's result codes.
pub use cudarc::driver::{sys::CUresult, DriverError};
/// NVRTC's error and result code, as [`CudaError::Compile`] and [`CudaError::Nvrtc`] keep them.
pub use cudarc::nvrtc::{result::NvrtcError, sys::nvrtcResult};

pub use crate::comm::gpu_buffer::GpuBuffer;
pub use crate::gpu::disk_cache::DiskCache;
pub use crate::gpu::tuning::TuneReport;
pub use compile::{compile_check, CacheSource, CompileStats, KERNEL_OPTIONS};
pub use context::Gpu;
pub use error::{ArgumentError, CudaError};
pub use executor::GpuGraph;
pub use held::DeviceHeld;
pub use kernel::Kernel;
pub use launch::{KernelArg, LaunchDims};
pub use memory::{DeviceField, DeviceField1, DeviceField2, DeviceField3};
pub use nvrtc::{nvrtc_info, NvrtcInfo, NVRTC_ENV};

use crate::field::{Field3, Shape3};

/// Checks the GPU path end to end on `gpu`: compiles a small kernel through [`Gpu::kernel`]
/// (and checks that asking again hits the memory cache), uploads a pseudo-random field, scales
/// it by 2 on the device, downloads and compares exactly, copies device to device, and checks
/// that a copy between different shapes is refused. Returns a one-paragraph report.
pub fn self_check(gpu: &Gpu) -> Result<String, CudaError> {
    const SOURCE: &str = r#"
extern "C" __global__ void stencil_self_check(const float* __restrict__ src, float* __restrict__ dst,
                                              long long n, float scale) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) dst[i] = scale * src[i];
}
"#;
    let entry = "stencil_self_check";
    let (kernel, first) = gpu.kernel_with_stats(SOURCE, entry, &[])?;
    let (_, again) = gpu.kernel_with_stats(SOURCE, entry, &[])?;

    let shape = Shape3::new([37, 19, 5]).halo(2);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let host = Field3::<f32>::from_fn(shape, |_| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 40) as f32 / (1u32 << 24) as f32 - 0.5
    });
    let src = gpu.upload(&host)?;
    let dst = gpu.alloc::<f32, 3>(shape)?;
    let n = shape.len();
    let dims = LaunchDims::covering([n, 1, 1], [256, 1, 1]);
    let args = [src.arg(), dst.arg(), KernelArg::I64(n as i64), KernelArg::F32(2.0)];
    // SAFETY: the kernel takes (const float*, float*, long long, float) and touches `n` floats
    // of each field, which hold `n`.
    let ((), kernel_ms) = gpu.time_ms(|| unsafe { gpu.launch(&kernel, dims, &args) })?;
    let expected: Vec<f32> = host.to_vec().iter().map(|v| 2.0 * v).collect();
    let wrong = dst.download()?.to_vec().iter().zip(&expected).filter(|(got, want)| got != want).count();

    let mut copy = gpu.alloc::<f32, 3>(shape)?;
    copy.copy_from(&src)?;
    let copied = copy.download()?.to_vec() == host.to_vec();
    let mut other = gpu.alloc::<f32, 3>(Shape3::new([37, 19, 5]))?;
    let refused = matches!(other.copy_from(&src), Err(CudaError::ShapeMismatch { .. }));

    let mut failures = Vec::new();
    if again.origin != CacheSource::Memory {
        failures.push(format!("asking for the kernel again came from {:?}, not memory", again.origin));
    }
    if wrong > 0 {
        failures.push(format!("{wrong} of {} points wrong after the kernel", expected.len()));
    }
    if !copied {
        failures.push("the device-to-device copy differs from the source".to_string());
    }
    if !refused {
        failures.push("a copy between different shapes was not refused".to_string());
    }
    if !failures.is_empty() {
        return Err(CudaError::SelfCheck { device: format!("{gpu:?}"), failures });
    }
    Ok(format!(
        "{gpu:?}: kernel from {:?} in {:.2} ms, again from {:?} in {:.3} ms; {} points scaled on the device \
         in {kernel_ms:.3} ms and downloaded exactly; device copy and shape check OK",
        first.origin,
        first.elapsed.as_secs_f64() * 1e3,
        again.origin,
        again.elapsed.as_secs_f64() * 1e3,
        expected.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_can_be_shared_across_threads_and_launch_dims_cover() {
        fn shared<T: Send + Sync>() {}
        shared::<Gpu>();
        shared::<Kernel>();
        shared::<DeviceField3<f64>>();
        let dims = LaunchDims::covering([100, 7, 0], [32, 4, 1]);
        assert_eq!((dims.grid, dims.shared_bytes), ([4, 2, 0], 0));
    }
}
