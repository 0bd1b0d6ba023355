//! Errors of the CUDA runtime as data: each variant keeps what a user acts on (the driver's or
//! NVRTC's result code, the kernel, the sizes) and has a stable code and a help sentence (the
//! catalogue is in [`crate::error`]); and the mapping of the driver's error codes onto them.

use crate::field::FieldError;
use cudarc::driver::{sys::CUresult, DriverError};
use cudarc::nvrtc::result::NvrtcError;
use cudarc::nvrtc::sys::nvrtcResult;
use std::fmt;
use std::sync::OnceLock;

/// Anything that can go wrong on the GPU path. Every variant has a [code](CudaError::code) and a
/// [help](CudaError::help) sentence; variants raised by a driver or NVRTC call keep its result
/// code ([`CudaError::driver_result`], [`CudaError::nvrtc_result`]) and return the cudarc error
/// as [`source`](std::error::Error::source).
///
/// `Debug` shows the code, the driver's or NVRTC's result code and the message: cudarc's
/// `DriverError` formats itself by calling into libcuda (and panics where none can be loaded),
/// which this formatting avoids. Display a `DriverError` taken from `source()` only where a driver
/// is installed.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CudaError {
    /// `libcuda` could not be loaded or is not a working driver (`S0301`).
    NoDriver {
        /// What was found instead.
        detail: String,
    },
    /// The driver supports an older CUDA than this build needs (`S0302`).
    DriverTooOld {
        /// The driver's CUDA version, as `cuDriverGetVersion` reports it (e.g. 12040).
        version: i32,
        /// The oldest version the runtime can use (12000).
        required: i32,
    },
    /// `libcuda` does not match the kernel driver (`S0303`).
    DriverMismatch {
        /// What was being done.
        during: String,
        /// The driver's error.
        error: DriverError,
    },
    /// `libnvrtc` (the run-time CUDA compiler) could not be loaded (`S0304`).
    NoNvrtc {
        /// The library names (or the `STENCIL_NVRTC` path) tried, in order.
        tried: Vec<String>,
        /// The driver's CUDA version (e.g. 12040), if a driver could be loaded.
        driver: Option<i32>,
    },
    /// The requested device ordinal does not exist (`S0305`).
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices the driver sees.
        count: usize,
    },
    /// The device ran out of memory (`S0306`).
    OutOfMemory {
        /// Bytes requested, when known.
        bytes: Option<usize>,
        /// What was being allocated.
        what: String,
        /// Free and total device memory in bytes, when known.
        free: Option<(usize, usize)>,
    },
    /// NVRTC rejected a kernel source (`S0307`).
    Compile {
        /// NVRTC's log.
        log: String,
        /// The first error's source line number (1-based) and that line's text.
        line: Option<(usize, String)>,
        /// The NVRTC options used.
        options: Vec<String>,
        /// NVRTC's result (`None`: it reported success but produced no cubin).
        error: Option<NvrtcError>,
    },
    /// The compiled source has no kernel of the entry's name (`S0308`).
    MissingEntry {
        /// The entry point asked for.
        entry: String,
    },
    /// An NVRTC call other than the compilation failed (`S0309`).
    Nvrtc {
        /// The call.
        during: &'static str,
        /// NVRTC's error.
        error: NvrtcError,
    },
    /// The driver cannot load the cubin on this GPU (`S0310`).
    BadBinary {
        /// What was being done.
        during: String,
        /// The driver's error.
        error: DriverError,
    },
    /// A launch with a block that has an axis of 0 threads (`S0311`).
    EmptyBlock {
        /// Entry point of the kernel.
        kernel: String,
        /// The block asked for.
        block: [u32; 3],
    },
    /// The driver refused a launch (`S0312`).
    LaunchFailed {
        /// Entry point of the kernel.
        kernel: String,
        /// Blocks per axis.
        grid: [u32; 3],
        /// Threads per block per axis.
        block: [u32; 3],
        /// Dynamic shared memory per block in bytes.
        shared_bytes: u32,
        /// The driver's error.
        error: DriverError,
    },
    /// The kernel cannot be given that much dynamic shared memory (`S0313`).
    SharedMemory {
        /// Entry point of the kernel.
        kernel: String,
        /// Bytes asked for.
        bytes: u32,
        /// The driver's error.
        error: DriverError,
    },
    /// A kernel faulted while running; reported by the next synchronising call, naming the last
    /// kernel launched. The CUDA context is unusable afterwards (`S0314`).
    KernelFault {
        /// Entry point of the last kernel launched (`<none launched>` if none).
        kernel: String,
        /// The call that reported the fault.
        during: String,
        /// The driver's error (e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`).
        error: DriverError,
    },
    /// A copy between fields of different shapes (`S0315`).
    ShapeMismatch {
        /// The operation (`upload`, `copy_from`, ...).
        operation: &'static str,
        /// Shape of the data copied from.
        source: String,
        /// Shape of the data copied to.
        destination: String,
    },
    /// An operation on fields of different [`Gpu`](crate::gpu::cuda::Gpu) handles (`S0316`).
    CrossDevice {
        /// The operation (`copy_from`, `fill_halos`).
        operation: &'static str,
        /// The handles involved.
        detail: String,
    },
    /// Misuse of a field accessor on a device field (e.g. `read_range` with a range that does
    /// not fit); reports the [`FieldError`]'s code.
    Field(FieldError),
    /// The strategy cannot run this stencil (`S0317`).
    UnsupportedStrategy {
        /// The stencil.
        stencil: String,
        /// Why, as the kernel printer says it.
        reason: String,
    },
    /// A size exceeds the kernels' 32-bit coordinates (`S0318`).
    TooLarge {
        /// What is too large (`stencil `s`: range points along one axis`, `fill_halos: extent`).
        what: String,
        /// Its value.
        value: usize,
    },
    /// A recorded step issued work that cannot be recorded (`S0319`).
    NotRecordable {
        /// The error the work raised while recording.
        error: Box<CudaError>,
    },
    /// [`self_check`](crate::gpu::cuda::self_check) found wrong results (`S0320`).
    SelfCheck {
        /// The device, described.
        device: String,
        /// What was wrong.
        failures: Vec<String>,
    },
    /// A call with arguments that cannot work (NUL in a name or a source, zero repetitions...)
    /// (`S0321`).
    InvalidArgument(ArgumentError),
    /// NCCL (the device-to-device transport between ranks) could not be loaded, could not be
    /// set up for these subdomains, or a call failed (`S0323`).
    Nccl {
        /// What was being done.
        during: String,
        /// What went wrong.
        detail: String,
    },
    /// The NVRTC found cannot make code that this driver or device runs: NVRTC of a newer CUDA
    /// than the driver, or one that does not know the device's architecture (`S0324`).
    NvrtcMismatch {
        /// The NVRTC, e.g. `NVRTC 13.0 (libnvrtc.so.13)`.
        nvrtc: String,
        /// The driver's CUDA version (e.g. 12040), if a driver could be loaded.
        driver: Option<i32>,
        /// Why it cannot be used.
        reason: String,
    },
    /// Any other driver failure (`S0322`).
    Driver {
        /// What was being done.
        during: String,
        /// The driver's error; its result code is `error.0`.
        error: DriverError,
    },
}

impl CudaError {
    /// The error's stable code (see the catalogue in [`crate::error`]); [`CudaError::Field`]
    /// reports the wrapped error's code.
    pub fn code(&self) -> &'static str {
        match self {
            CudaError::NoDriver { .. } => "S0301",
            CudaError::DriverTooOld { .. } => "S0302",
            CudaError::DriverMismatch { .. } => "S0303",
            CudaError::NoNvrtc { .. } => "S0304",
            CudaError::NoDevice { .. } => "S0305",
            CudaError::OutOfMemory { .. } => "S0306",
            CudaError::Compile { .. } => "S0307",
            CudaError::MissingEntry { .. } => "S0308",
            CudaError::Nvrtc { .. } => "S0309",
            CudaError::BadBinary { .. } => "S0310",
            CudaError::EmptyBlock { .. } => "S0311",
            CudaError::LaunchFailed { .. } => "S0312",
            CudaError::SharedMemory { .. } => "S0313",
            CudaError::KernelFault { .. } => "S0314",
            CudaError::ShapeMismatch { .. } => "S0315",
            CudaError::CrossDevice { .. } => "S0316",
            CudaError::Field(e) => e.code(),
            CudaError::UnsupportedStrategy { .. } => "S0317",
            CudaError::TooLarge { .. } => "S0318",
            CudaError::NotRecordable { .. } => "S0319",
            CudaError::SelfCheck { .. } => "S0320",
            CudaError::InvalidArgument(_) => "S0321",
            CudaError::Driver { .. } => "S0322",
            CudaError::Nccl { .. } => "S0323",
            CudaError::NvrtcMismatch { .. } => "S0324",
        }
    }

    /// The driver's result code, for the variants a driver call raised.
    pub fn driver_result(&self) -> Option<CUresult> {
        match self {
            CudaError::DriverMismatch { error, .. }
            | CudaError::BadBinary { error, .. }
            | CudaError::LaunchFailed { error, .. }
            | CudaError::SharedMemory { error, .. }
            | CudaError::KernelFault { error, .. }
            | CudaError::Driver { error, .. } => Some(error.0),
            CudaError::NotRecordable { error } => error.driver_result(),
            _ => None,
        }
    }

    /// NVRTC's result code, for the variants an NVRTC call raised.
    pub fn nvrtc_result(&self) -> Option<nvrtcResult> {
        match self {
            CudaError::Compile { error, .. } => error.map(|e| e.0),
            CudaError::Nvrtc { error, .. } => Some(error.0),
            _ => None,
        }
    }

    /// What went wrong (the first line of `Display`), without code and help.
    pub fn message(&self) -> String {
        match self {
            CudaError::NoDriver { detail } => format!("the CUDA driver (libcuda.so) could not be used: {detail}"),
            CudaError::DriverTooOld { version, required } => format!(
                "the NVIDIA driver supports CUDA {}, the runtime needs CUDA {} or newer",
                cuda_version(*version),
                cuda_version(*required)
            ),
            CudaError::DriverMismatch { during, error } => {
                format!("{during}: {}: libcuda does not match the kernel driver", describe(*error))
            }
            CudaError::NoNvrtc { tried, driver } => format!(
                "NVRTC could not be loaded (tried {}){}",
                tried.join(", "),
                match driver {
                    Some(d) => format!(" for the CUDA {} driver", cuda_version(*d)),
                    None => ", no CUDA driver loaded".to_string(),
                }
            ),
            CudaError::NoDevice { ordinal, count } => {
                format!("no CUDA device {ordinal}: the driver sees {count} device(s)")
            }
            CudaError::OutOfMemory { bytes, what, free } => {
                let mut m = match bytes {
                    Some(b) => format!("out of GPU memory allocating {b} bytes for {what}"),
                    None => format!("out of GPU memory in {what}"),
                };
                if let Some((free, total)) = free {
                    m += &format!(" ({free} of {total} bytes free)");
                }
                m
            }
            CudaError::Compile { line, error, .. } => {
                let mut m = match error {
                    Some(e) => format!("NVRTC failed to compile the kernel ({:?})", e.0),
                    None => "NVRTC produced no cubin".to_string(),
                };
                if let Some((n, text)) = line {
                    m += &format!(" at line {n}: `{}`", text.trim());
                }
                m
            }
            CudaError::MissingEntry { entry } => format!("the compiled source has no kernel `{entry}`"),
            CudaError::Nvrtc { during, error } => format!("{during} failed: {:?}", error.0),
            CudaError::BadBinary { during, error } => {
                format!("{during}: {}: the cubin does not fit this GPU or driver", describe(*error))
            }
            CudaError::EmptyBlock { kernel, block } => format!("kernel `{kernel}`: block {block:?} has no threads"),
            CudaError::LaunchFailed { kernel, grid, block, shared_bytes, error } => format!(
                "kernel `{kernel}`: launch failed: {} (grid {grid:?}, block {block:?}, {shared_bytes} bytes shared)",
                describe(*error)
            ),
            CudaError::SharedMemory { kernel, bytes, error } => {
                format!("kernel `{kernel}`: cannot use {bytes} bytes of dynamic shared memory: {}", describe(*error))
            }
            CudaError::KernelFault { kernel, during, error } => format!(
                "kernel `{kernel}`: faulted while running: {} (reported by {during}); the CUDA context is unusable now",
                describe(*error)
            ),
            CudaError::ShapeMismatch { operation, source, destination } => {
                format!("{operation}: source shape ({source}) differs from destination shape ({destination})")
            }
            CudaError::CrossDevice { operation, detail } => {
                format!("{operation} between fields of different Gpu handles: {detail}")
            }
            CudaError::Field(e) => e.message(),
            CudaError::UnsupportedStrategy { stencil, reason } => format!("stencil `{stencil}`: {reason}"),
            CudaError::TooLarge { what, value } => {
                format!("{what} is {value}, which exceeds the kernels' 32-bit coordinates")
            }
            CudaError::NotRecordable { error } => {
                format!("recording a step failed: {} [{}]", error.message(), error.code())
            }
            CudaError::SelfCheck { device, failures } => {
                format!("self check failed on {device}: {}", failures.join("; "))
            }
            CudaError::InvalidArgument(e) => e.to_string(),
            CudaError::Driver { during, error } => format!("{during}: {}", describe(*error)),
            CudaError::Nccl { during, detail } => format!("NCCL, {during}: {detail}"),
            CudaError::NvrtcMismatch { nvrtc, driver, reason } => format!(
                "{nvrtc} cannot be used{}: {reason}",
                match driver {
                    Some(d) => format!(" with the CUDA {} driver", cuda_version(*d)),
                    None => String::new(),
                }
            ),
        }
    }

    /// What to change.
    pub fn help(&self) -> String {
        let s = match self {
            CudaError::NoDriver { .. } => {
                "install the NVIDIA driver (CUDA 12.0 or newer) and check LD_LIBRARY_PATH"
            }
            CudaError::DriverTooOld { .. } => "upgrade the NVIDIA driver to one for CUDA 12.0 or newer",
            CudaError::DriverMismatch { .. } => {
                "do not put /usr/local/cuda/compat first in LD_LIBRARY_PATH (libcuda must come from the installed driver)"
            }
            CudaError::NoNvrtc { driver: Some(d), .. } if *d < 13000 => {
                "install NVRTC of CUDA 12 (e.g. `pip install nvidia-cuda-nvrtc-cu12`) and put its lib folder in \
                 LD_LIBRARY_PATH, or set STENCIL_NVRTC to the path of its libnvrtc.so.12"
            }
            CudaError::NoNvrtc { .. } => {
                "install NVRTC of CUDA 13 or 12 (e.g. `pip install nvidia-cuda-nvrtc==13.0.*`, or \
                 `nvidia-cuda-nvrtc-cu12` for a CUDA 12 driver) and put its lib folder in LD_LIBRARY_PATH, or set \
                 STENCIL_NVRTC to the path of its libnvrtc.so.13 or .so.12"
            }
            CudaError::NoDevice { .. } => "use an ordinal below `Gpu::count()` (check CUDA_VISIBLE_DEVICES)",
            CudaError::OutOfMemory { .. } => {
                "use a smaller grid or fewer fields, or drop device fields that are no longer needed"
            }
            CudaError::Compile { .. } => {
                "fix the source at the line NVRTC's log names (for a kernel generated from a stencil, report \
                 it with the log)"
            }
            CudaError::MissingEntry { .. } => {
                "declare the kernel `extern \"C\" __global__` with exactly that name (no C++ name mangling)"
            }
            CudaError::Nvrtc { .. } => {
                "check the NVRTC installation (libnvrtc.so.13 or .so.12, with its libnvrtc-builtins next to it)"
            }
            CudaError::BadBinary { .. } => {
                "clear the kernel cache ($STENCIL_CACHE_DIR) and make sure the driver's CUDA major version is at \
                 least NVRTC's (STENCIL_NVRTC picks the NVRTC)"
            }
            CudaError::EmptyBlock { .. } => "give every block axis at least one thread",
            CudaError::LaunchFailed { error, .. } => match error.0 {
                CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => "use smaller blocks or fewer registers",
                CUresult::CUDA_ERROR_INVALID_VALUE => "check the grid and block dimensions against the device limits",
                _ => "check the launch dimensions and the kernel's arguments",
            },
            CudaError::SharedMemory { .. } => {
                "ask for less dynamic shared memory per block (the device's opt-in limit is lower)"
            }
            CudaError::KernelFault { .. } => {
                "restart the process; the kernel read or wrote outside its memory or trapped: check its \
                 arguments (compute-sanitizer finds the access)"
            }
            CudaError::ShapeMismatch { .. } => {
                "host and device fields must have identical shapes (interior, halo, order, align)"
            }
            CudaError::CrossDevice { .. } => "use one Gpu (clones are fine) or copy through the host",
            CudaError::Field(e) => return e.help(),
            CudaError::UnsupportedStrategy { .. } => "pick another `Strategy`, or none for the stencil's default",
            CudaError::TooLarge { .. } => "split the range or the field into parts below 2^31 points per axis",
            CudaError::NotRecordable { .. } => {
                "a recorded step may only issue work on the device (launches, halo fills, copies between \
                 device fields): keep downloads, read_range and synchronize out of it"
            }
            CudaError::SelfCheck { .. } => "report it, with the device, the driver version and this message",
            CudaError::InvalidArgument(_) => "change the argument the message names",
            CudaError::Driver { .. } => "look the driver's error code up in the CUDA driver API documentation",
            CudaError::Nccl { .. } => {
                "make `libnccl.so` loadable (LD_LIBRARY_PATH; a link named libnccl.so to libnccl.so.2 will do), give \
                 every subdomain of the run its own GPU, or move halos host-staged through MPI instead \
                 (`Transport::HostStaged`, or STENCIL_TRANSPORT=mpi)"
            }
            CudaError::NvrtcMismatch { .. } => {
                "use NVRTC of the driver's CUDA major version or an older one, not older than 12.0: for a CUDA 12 \
                 driver `pip install nvidia-cuda-nvrtc-cu12` and set STENCIL_NVRTC to the path of its \
                 libnvrtc.so.12 (or put its lib folder in LD_LIBRARY_PATH); or upgrade the driver"
            }
        };
        s.to_string()
    }
}

impl fmt::Debug for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CudaError::Field(e) => f.debug_tuple("CudaError::Field").field(e).finish(),
            _ => {
                let mut d = f.debug_struct("CudaError");
                d.field("code", &self.code());
                if let Some(r) = self.driver_result() {
                    d.field("driver_result", &r);
                }
                if let Some(r) = self.nvrtc_result() {
                    d.field("nvrtc_result", &r);
                }
                d.field("message", &self.message()).finish()
            }
        }
    }
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let CudaError::Field(e) = self {
            return write!(f, "{e}");
        }
        write!(f, "{} [{}]\nhelp: {}", self.message(), self.code(), self.help())?;
        if let CudaError::Compile { log, options, .. } = self {
            write!(f, "\n{}\n(options {options:?})", log.trim_end())?;
        }
        Ok(())
    }
}

impl std::error::Error for CudaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CudaError::DriverMismatch { error, .. }
            | CudaError::BadBinary { error, .. }
            | CudaError::LaunchFailed { error, .. }
            | CudaError::SharedMemory { error, .. }
            | CudaError::KernelFault { error, .. }
            | CudaError::Driver { error, .. } => Some(error),
            CudaError::Compile { error: Some(error), .. } | CudaError::Nvrtc { error, .. } => Some(error),
            CudaError::Field(e) => Some(e),
            CudaError::NotRecordable { error } => Some(&**error),
            _ => None,
        }
    }
}

/// A CUDA version as `cuDriverGetVersion` reports it, as people write it: `12040` as `12.4`.
pub(crate) fn cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, v % 1000 / 10)
}

/// The driver's name and description of an error code, e.g.
/// `CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)`.
/// Without a loadable libcuda (a value built by hand, e.g. in a test) just the code's name.
pub(crate) fn describe(e: DriverError) -> String {
    static DRIVER_PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to dlopen the driver library.
    if !*DRIVER_PRESENT.get_or_init(|| unsafe { cudarc::driver::sys::is_culib_present() }) {
        return format!("{:?}", e.0);
    }
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    if text.is_empty() {
        name
    } else {
        format!("{name} ({text})")
    }
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
    let during = what.to_string();
    match e.0 {
        CUDA_ERROR_OUT_OF_MEMORY => CudaError::OutOfMemory { bytes: None, what: during, free: None },
        CUDA_ERROR_STUB_LIBRARY => CudaError::NoDriver { detail: format!("{what}: {}", describe(e)) },
        CUDA_ERROR_SYSTEM_DRIVER_MISMATCH | CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => {
            CudaError::DriverMismatch { during, error: e }
        }
        CUDA_ERROR_NO_BINARY_FOR_GPU | CUDA_ERROR_INVALID_IMAGE | CUDA_ERROR_UNSUPPORTED_PTX_VERSION => {
            CudaError::BadBinary { during, error: e }
        }
        _ => CudaError::Driver { during, error: e },
    }
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

/// What is wrong with the arguments of a CUDA call ([`CudaError::InvalidArgument`], S0321).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgumentError {
    /// A kernel's entry name holds a NUL byte.
    NulInEntry {
        /// The name.
        entry: String,
    },
    /// A kernel's source holds a NUL byte.
    NulInSource,
    /// NVRTC refused its options.
    NvrtcOptions {
        /// The NVRTC call that failed.
        during: String,
    },
    /// An autotuning setting of the environment that cannot be read.
    Tuning(crate::tuning::TuneSettingError),
    /// A copy to or from the host, or a synchronisation, while a step is being recorded.
    WhileRecording {
        /// What was asked.
        what: String,
        /// The GPU, described.
        gpu: String,
    },
    /// `copy_bandwidth_gbs` with nothing to copy.
    CopyBandwidth {
        /// Bytes asked for.
        bytes: usize,
        /// Repetitions asked for.
        reps: usize,
    },
    /// A box of a halo message not aligned to its elements in the buffer.
    UnalignedBox {
        /// Its byte offset in the buffer.
        offset: usize,
        /// The bytes of one element.
        elem_bytes: usize,
    },
    /// Staging more bytes of a halo message buffer than it holds.
    Staging {
        /// Bytes asked for.
        bytes: usize,
        /// The buffer's bytes.
        buffer: usize,
    },
    /// A halo message larger than one of the buffers it moves between.
    MessageSize {
        /// The message's bytes.
        bytes: usize,
        /// The source buffer's bytes.
        source: usize,
        /// The destination buffer's bytes.
        destination: usize,
    },
}

impl fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ArgumentError as E;
        match self {
            E::NulInEntry { entry } => write!(f, "kernel entry {entry:?} contains a NUL byte"),
            E::NulInSource => f.write_str("kernel source contains a NUL byte"),
            E::NvrtcOptions { during } => write!(f, "NVRTC options: {during}"),
            E::Tuning(e) => write!(f, "{e}"),
            E::WhileRecording { what, gpu } => {
                write!(f, "{what} on {gpu} while a step is being recorded: a recording holds device work only")
            }
            E::CopyBandwidth { bytes, reps } => {
                write!(f, "copy_bandwidth_gbs needs bytes > 0 and reps > 0, got {bytes}, {reps}")
            }
            E::UnalignedBox { offset, elem_bytes } => write!(
                f,
                "halo message: a box at byte {offset} of the buffer is not aligned to its {elem_bytes}-byte elements"
            ),
            E::Staging { bytes, buffer } => {
                write!(f, "staging {bytes} bytes of a halo message buffer of {buffer} bytes")
            }
            E::MessageSize { bytes, source, destination } => {
                write!(f, "halo message of {bytes} bytes between buffers of {source} and {destination} bytes")
            }
        }
    }
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
        let e = CudaError::Compile {
            log: log.to_string(),
            line: locate_error(log, SRC),
            options: vec![],
            error: Some(NvrtcError(nvrtcResult::NVRTC_ERROR_COMPILATION)),
        };
        assert!(e.to_string().contains("at line 3: `a[i] = b;`"), "{e}");
    }
}
