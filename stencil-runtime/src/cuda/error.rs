//! Errors of the CUDA runtime, with messages that say what to do, and the mapping of the
//! driver's error codes onto them.

use cudarc::driver::{sys::CUresult, DriverError};
use std::fmt;

/// Anything that can go wrong on the GPU path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CudaError {
    /// `libcuda` could not be loaded or is not a working driver.
    NoDriver {
        /// What was found instead.
        detail: String,
    },
    /// `libnvrtc` (the run-time CUDA compiler, `libnvrtc.so.13`) could not be loaded.
    NoNvrtc,
    /// The requested device ordinal does not exist.
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices the driver sees.
        count: usize,
    },
    /// The device ran out of memory.
    OutOfMemory {
        /// Bytes requested, when known.
        bytes: Option<usize>,
        /// What was being allocated (and the free memory, when known).
        what: String,
    },
    /// NVRTC rejected a kernel source.
    Compile {
        /// NVRTC's log (and the options used).
        log: String,
        /// The first error's source line number (1-based) and that line's text.
        line: Option<(usize, String)>,
    },
    /// A kernel failed to launch, or faulted while running (reported at the next
    /// synchronising call, naming the last kernel launched).
    Launch {
        /// Entry point of the kernel.
        kernel: String,
        /// What went wrong.
        message: String,
    },
    /// A copy between fields of different shapes.
    ShapeMismatch {
        /// The operation (`upload`, `copy_from`, ...).
        operation: &'static str,
        /// Shape of the data copied from.
        source: String,
        /// Shape of the data copied to.
        destination: String,
    },
    /// A call with arguments that cannot work (empty launch, cross-GPU copy, NUL in a name...).
    InvalidArgument(String),
    /// Any other driver or NVRTC failure.
    Driver(String),
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CudaError::NoDriver { detail } => write!(
                f,
                "the CUDA driver (libcuda.so) could not be used: {detail}; install the NVIDIA driver \
                 (CUDA 13.0 or newer) and check LD_LIBRARY_PATH"
            ),
            CudaError::NoNvrtc => write!(
                f,
                "NVRTC (libnvrtc.so.13) could not be loaded; install the CUDA 13 NVRTC library (e.g. \
                 `pip install nvidia-cuda-nvrtc==13.0.*`) and put its lib folder in LD_LIBRARY_PATH"
            ),
            CudaError::NoDevice { ordinal, count } => {
                write!(f, "no CUDA device {ordinal}: the driver sees {count} device(s)")
            }
            CudaError::OutOfMemory { bytes: Some(b), what } => {
                write!(f, "out of GPU memory allocating {b} bytes for {what}")
            }
            CudaError::OutOfMemory { bytes: None, what } => write!(f, "out of GPU memory in {what}"),
            CudaError::Compile { log, line } => {
                write!(f, "NVRTC failed to compile the kernel")?;
                if let Some((n, text)) = line {
                    write!(f, " at line {n}: `{}`", text.trim())?;
                }
                write!(f, "\n{}", log.trim_end())
            }
            CudaError::Launch { kernel, message } => write!(f, "kernel `{kernel}`: {message}"),
            CudaError::ShapeMismatch { operation, source, destination } => write!(
                f,
                "{operation}: source shape ({source}) differs from destination shape ({destination}); \
                 host and device fields must have identical shapes (interior, halo, order, align)"
            ),
            CudaError::InvalidArgument(m) | CudaError::Driver(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CudaError {}

/// The driver's name and description of an error code, e.g.
/// `CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)`.
pub(crate) fn describe(e: DriverError) -> String {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{name} ({text})")
}

/// Errors that a kernel raises while running: they are reported by whatever call synchronises
/// next, and leave the context unusable.
pub(crate) fn is_kernel_fault(e: DriverError) -> bool {
    use CUresult::*;
    matches!(
        e.0,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_LAUNCH_TIMEOUT
    )
}

/// Maps a driver error raised while doing `what` (kernel faults aside, see `Gpu::fail`).
pub(crate) fn driver(what: &str, e: DriverError) -> CudaError {
    use CUresult::*;
    let hint = match e.0 {
        CUDA_ERROR_OUT_OF_MEMORY => return CudaError::OutOfMemory { bytes: None, what: what.to_string() },
        CUDA_ERROR_STUB_LIBRARY => return CudaError::NoDriver { detail: format!("{what}: {}", describe(e)) },
        CUDA_ERROR_SYSTEM_DRIVER_MISMATCH | CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => {
            "; libcuda does not match the kernel driver: do not put /usr/local/cuda/compat first in LD_LIBRARY_PATH"
        }
        CUDA_ERROR_NO_BINARY_FOR_GPU | CUDA_ERROR_INVALID_IMAGE | CUDA_ERROR_UNSUPPORTED_PTX_VERSION => {
            "; the cubin does not fit this GPU or driver: clear the kernel cache ($STENCIL_CACHE_DIR)"
        }
        _ => "",
    };
    CudaError::Driver(format!("{what}: {}{hint}", describe(e)))
}

/// The first location NVRTC's log reports (an error's if there is one), as the 1-based line
/// number and the text of that line of `source`. NVRTC writes `name(LINE): error: ...`.
pub(crate) fn locate_error(log: &str, source: &str) -> Option<(usize, String)> {
    let location = |l: &str| -> Option<usize> {
        let close = l.find("): ")?;
        let open = l[..close].rfind('(')?;
        l[open + 1..close].parse().ok().filter(|&n| n > 0)
    };
    let found: Vec<(usize, bool)> = log.lines().filter_map(|l| Some((location(l)?, l.contains("error")))).collect();
    let (n, _) = found.iter().find(|(_, is_error)| *is_error).or(found.first())?;
    Some((*n, source.lines().nth(n - 1).unwrap_or_default().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "extern \"C\" __global__ void k(float* a) {\n  int i = threadIdx.x;\n  a[i] = b;\n}\n";

    #[test]
    fn error_lines_are_located_and_quoted() {
        let log = "stencil.cu(2): warning #177-D: variable \"j\" was declared but never referenced\n\
                   stencil.cu(3): error: identifier \"b\" is undefined\n\n\
                   1 error detected in the compilation of \"stencil.cu\".\n";
        assert_eq!(locate_error(log, SRC), Some((3, "  a[i] = b;".to_string())));
        let warning_only = "stencil.cu(2): warning #177-D: unused\n";
        assert_eq!(locate_error(warning_only, SRC), Some((2, "  int i = threadIdx.x;".to_string())));
        assert_eq!(locate_error("nvrtc: error: invalid value for --gpu-architecture (-arch)\n", SRC), None);
        assert_eq!(locate_error("stencil.cu(99): error: x\n", SRC), Some((99, String::new())));
        let e = CudaError::Compile { log: log.to_string(), line: locate_error(log, SRC) };
        assert!(e.to_string().contains("at line 3: `a[i] = b;`"), "{e}");
    }
}
