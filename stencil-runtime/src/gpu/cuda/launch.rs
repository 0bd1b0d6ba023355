//! Raw kernel launches: grid and block sizes ([`LaunchDims`]), arguments ([`KernelArg`]) and the
//! `unsafe` [`Gpu::launch`].

use super::context::Gpu;
use super::error::{is_kernel_fault, CudaError};
use super::kernel::Kernel;
use crate::stencil::args::ArgValue;
use cudarc::driver::result;
use cudarc::driver::sys::CUfunction_attribute;
use std::ffi::c_void;

/// Dynamic shared memory a kernel may use without opting in through a function attribute.
const DEFAULT_DYNAMIC_SHARED: u32 = 48 * 1024;

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
        let name = || kernel.entry().to_string();
        if block.contains(&0) {
            return Err(CudaError::EmptyBlock { kernel: name(), block });
        }
        if grid.contains(&0) {
            return Ok(());
        }
        self.bind()?;
        if shared_bytes > DEFAULT_DYNAMIC_SHARED && kernel.dynamic_shared_opted_in() < shared_bytes {
            let attr = CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            kernel.function().set_attribute(attr, shared_bytes as i32).map_err(|error| CudaError::SharedMemory {
                kernel: name(),
                bytes: shared_bytes,
                error,
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
            Err(error) => return Err(CudaError::LaunchFailed { kernel: name(), grid, block, shared_bytes, error }),
            Ok(()) => {}
        }
        *self.inner.last_kernel.lock().unwrap_or_else(|p| p.into_inner()) = Some(kernel.entry_arc());
        Ok(())
    }
}

/// The kernel argument of a stencil's scalar or field argument (`None` for a reduction, whose
/// pointer is the launch's own scratch memory).
pub(crate) fn scalar_or_field<const D: usize>(v: &ArgValue<'_, D>) -> Option<KernelArg<'static>> {
    Some(match *v {
        ArgValue::F32(x) => KernelArg::F32(x),
        ArgValue::F64(x) => KernelArg::F64(x),
        ArgValue::I32(x) => KernelArg::I32(x),
        ArgValue::U32(x) => KernelArg::U32(x),
        ArgValue::Bool(x) => KernelArg::I32(x as i32),
        ArgValue::Field { ptr, .. } | ArgValue::Held { ptr, .. } => KernelArg::Ptr(ptr),
        ArgValue::Reduction(_) => return None,
    })
}
