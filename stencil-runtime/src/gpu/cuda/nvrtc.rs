//! NVRTC, chosen by what the driver supports and loaded at run time: the selection (which
//! library names to try, whether the NVRTC found can make code for this driver and device, and
//! whether that code is a cubin or PTX) is pure and unit-tested; the loader below it opens the
//! library with `libloading` and looks up the dozen calls the runtime makes.
//!
//! - A driver older than CUDA 12.0 is refused (`S0302`).
//! - `STENCIL_NVRTC` (a path, or a library name the dynamic loader finds) forces one library.
//! - Otherwise the NVRTC of the driver's major version is tried first, then older ones down to 12
//!   (`libnvrtc.so.13`, then `libnvrtc.so.12` on a CUDA 13 driver; only `libnvrtc.so.12` on a 12
//!   driver), then the unversioned `libnvrtc.so`; without a driver (compile checks) 13, then 12.
//! - An NVRTC newer (major) than the driver is refused (`S0324`): its code needs that driver.
//! - Kernels are cubins for the device's `sm_XY` when NVRTC knows the architecture (a cubin of
//!   NVRTC 12.x loads on any 12 driver, by CUDA's minor-version compatibility); for a device
//!   newer than NVRTC knows, PTX for the newest architecture it knows, which the driver compiles
//!   on load; that needs a driver at least as new as NVRTC (`S0324` otherwise).

use super::error::{cuda_version, CudaError};
use cudarc::nvrtc::result::NvrtcError;
use cudarc::nvrtc::sys::nvrtcResult;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

/// The oldest driver the runtime can use: CUDA 12.0 (`cuDriverGetVersion` reports 12000).
pub(crate) const MIN_DRIVER_VERSION: i32 = 12000;

/// The oldest NVRTC major version the runtime uses.
const MIN_NVRTC_MAJOR: i32 = 12;

/// The environment variable that forces one NVRTC library (a path or a name).
pub const NVRTC_ENV: &str = "STENCIL_NVRTC";

/// The file name of NVRTC of major version `major` on this platform.
fn library_name(major: i32) -> String {
    if cfg!(windows) {
        format!("nvrtc64_{major}0_0.dll")
    } else if cfg!(target_os = "macos") {
        format!("libnvrtc.{major}.dylib")
    } else {
        format!("libnvrtc.so.{major}")
    }
}

/// The NVRTC libraries to try, in order, for a driver of CUDA `driver` (`None`: no driver, as in
/// compile checks), or the one `forced` names (`STENCIL_NVRTC`). A driver older than
/// [`MIN_DRIVER_VERSION`] is `S0302`.
pub(crate) fn nvrtc_candidates(driver: Option<i32>, forced: Option<&str>) -> Result<Vec<String>, CudaError> {
    if let Some(version) = driver.filter(|&v| v < MIN_DRIVER_VERSION) {
        return Err(CudaError::DriverTooOld { version, required: MIN_DRIVER_VERSION });
    }
    if let Some(path) = forced.map(str::trim).filter(|p| !p.is_empty()) {
        return Ok(vec![path.to_string()]);
    }
    let newest = driver.map_or(13, |v| v / 1000);
    let mut names: Vec<String> = (MIN_NVRTC_MAJOR..=newest).rev().map(library_name).collect();
    if !cfg!(windows) {
        names.push(format!("{}nvrtc{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX));
    }
    Ok(names)
}

/// Whether NVRTC `version` (major, minor), loaded from `path`, can make code for a driver of CUDA
/// `driver`: not older than 12, and not of a newer major version than the driver.
pub(crate) fn check_nvrtc(driver: Option<i32>, version: (i32, i32), path: &str) -> Result<(), CudaError> {
    let nvrtc = format!("NVRTC {}.{} ({path})", version.0, version.1);
    if version.0 < MIN_NVRTC_MAJOR {
        return Err(CudaError::NvrtcMismatch {
            nvrtc,
            driver,
            reason: format!("the runtime needs NVRTC {MIN_NVRTC_MAJOR}.0 or newer"),
        });
    }
    if let Some(d) = driver.filter(|d| version.0 > d / 1000) {
        return Err(CudaError::NvrtcMismatch {
            nvrtc,
            driver,
            reason: format!(
                "its code needs a driver for CUDA {}.0 or newer, and the driver supports CUDA {}",
                version.0,
                cuda_version(d)
            ),
        });
    }
    Ok(())
}

/// What kernels are compiled to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// A cubin for this real architecture (`sm_90`): the driver loads it as it is.
    Cubin(String),
    /// PTX for this virtual architecture (`compute_90`): the driver compiles it on load.
    Ptx(String),
}

impl Target {
    /// The `--gpu-architecture` value.
    pub(crate) fn arch(&self) -> &str {
        match self {
            Target::Cubin(a) | Target::Ptx(a) => a,
        }
    }
}

/// What to compile for a device of compute capability `capability`, with NVRTC `version`
/// supporting the architectures `supported` (`nvrtcGetSupportedArchs`: 75, 80, 90...), under a
/// driver of CUDA `driver`.
pub(crate) fn code_target(
    driver: Option<i32>,
    version: (i32, i32),
    supported: &[i32],
    capability: (u32, u32),
) -> Result<Target, CudaError> {
    let sm = (capability.0 * 10 + capability.1) as i32;
    if supported.contains(&sm) {
        return Ok(Target::Cubin(format!("sm_{sm}")));
    }
    let nvrtc = format!("NVRTC {}.{}", version.0, version.1);
    let known = match (supported.iter().min(), supported.iter().max()) {
        (Some(lo), Some(hi)) => format!("sm_{lo} to sm_{hi}"),
        _ => "no architecture".to_string(),
    };
    let Some(&below) = supported.iter().filter(|&&s| s < sm).max() else {
        return Err(CudaError::NvrtcMismatch {
            nvrtc,
            driver,
            reason: format!("it cannot compile for this device's sm_{sm} (it knows {known}): use an older NVRTC"),
        });
    };
    // PTX of NVRTC X.Y is of an ISA version that drivers older than CUDA X.Y do not accept.
    let needed = version.0 * 1000 + version.1 * 10;
    match driver {
        Some(d) if d < needed => Err(CudaError::NvrtcMismatch {
            nvrtc,
            driver,
            reason: format!(
                "it does not know this device's sm_{sm} (it knows {known}), and the PTX it would make instead \
                 needs a driver for CUDA {} or newer",
                cuda_version(needed)
            ),
        }),
        _ => Ok(Target::Ptx(format!("compute_{below}"))),
    }
}

/// The driver's CUDA version where a driver can be loaded (`cuDriverGetVersion` needs no
/// `cuInit`).
fn loaded_driver_version() -> Option<i32> {
    // SAFETY: only tries to dlopen the driver library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return None;
    }
    let mut version = 0;
    // SAFETY: writes one int.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }.result().ok()?;
    Some(version)
}

/// An opaque NVRTC program.
pub(crate) type Program = *mut c_void;

type Ret = u32;

/// The loaded NVRTC: its calls, version, where it came from, and the architectures it knows.
pub(crate) struct Nvrtc {
    /// Keeps the functions below valid.
    _lib: libloading::Library,
    /// The name or path it was loaded by.
    pub(crate) path: String,
    /// `nvrtcVersion`.
    pub(crate) version: (i32, i32),
    /// `nvrtcGetSupportedArchs` (e.g. 75, 80, 86, 89, 90, 100, 120).
    pub(crate) supported: Vec<i32>,
    /// The driver's CUDA version when NVRTC was chosen, if a driver was loadable.
    pub(crate) driver: Option<i32>,
    create: unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Ret,
    compile: unsafe extern "C" fn(Program, c_int, *const *const c_char) -> Ret,
    log_size: unsafe extern "C" fn(Program, *mut usize) -> Ret,
    log: unsafe extern "C" fn(Program, *mut c_char) -> Ret,
    cubin_size: unsafe extern "C" fn(Program, *mut usize) -> Ret,
    cubin: unsafe extern "C" fn(Program, *mut c_char) -> Ret,
    ptx_size: unsafe extern "C" fn(Program, *mut usize) -> Ret,
    ptx: unsafe extern "C" fn(Program, *mut c_char) -> Ret,
    destroy: unsafe extern "C" fn(*mut Program) -> Ret,
}

/// NVRTC's result codes as cudarc names them (an unknown code reads as an internal error).
fn result(code: Ret) -> Result<(), NvrtcError> {
    use nvrtcResult::*;
    const ALL: [nvrtcResult; 18] = [
        NVRTC_SUCCESS,
        NVRTC_ERROR_OUT_OF_MEMORY,
        NVRTC_ERROR_PROGRAM_CREATION_FAILURE,
        NVRTC_ERROR_INVALID_INPUT,
        NVRTC_ERROR_INVALID_PROGRAM,
        NVRTC_ERROR_INVALID_OPTION,
        NVRTC_ERROR_COMPILATION,
        NVRTC_ERROR_BUILTIN_OPERATION_FAILURE,
        NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION,
        NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION,
        NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID,
        NVRTC_ERROR_INTERNAL_ERROR,
        NVRTC_ERROR_TIME_FILE_WRITE_FAILED,
        NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED,
        NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED,
        NVRTC_ERROR_PCH_CREATE,
        NVRTC_ERROR_CANCELLED,
        NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED,
    ];
    match ALL.iter().find(|&&r| r as u32 == code).copied().unwrap_or(NVRTC_ERROR_INTERNAL_ERROR) {
        NVRTC_SUCCESS => Ok(()),
        r => Err(NvrtcError(r)),
    }
}

impl Nvrtc {
    /// Opens `path` and looks up the calls; `None` when it is not a loadable NVRTC.
    fn open(path: &str, driver: Option<i32>) -> Option<Nvrtc> {
        // SAFETY: loading NVRTC runs no initialisation with preconditions; every symbol below is
        // taken with its C signature from nvrtc.h (all present since CUDA 11.2).
        unsafe {
            let lib = libloading::Library::new(path).ok()?;
            macro_rules! sym {
                ($name:literal) => {
                    *lib.get($name).ok()?
                };
            }
            let version_fn: unsafe extern "C" fn(*mut c_int, *mut c_int) -> Ret = sym!(b"nvrtcVersion\0");
            let count_fn: unsafe extern "C" fn(*mut c_int) -> Ret = sym!(b"nvrtcGetNumSupportedArchs\0");
            let archs_fn: unsafe extern "C" fn(*mut c_int) -> Ret = sym!(b"nvrtcGetSupportedArchs\0");
            let (mut major, mut minor, mut count) = (0, 0, 0);
            result(version_fn(&mut major, &mut minor)).ok()?;
            result(count_fn(&mut count)).ok()?;
            let mut supported = vec![0; count.max(0) as usize];
            result(archs_fn(supported.as_mut_ptr())).ok()?;
            Some(Nvrtc {
                create: sym!(b"nvrtcCreateProgram\0"),
                compile: sym!(b"nvrtcCompileProgram\0"),
                log_size: sym!(b"nvrtcGetProgramLogSize\0"),
                log: sym!(b"nvrtcGetProgramLog\0"),
                cubin_size: sym!(b"nvrtcGetCUBINSize\0"),
                cubin: sym!(b"nvrtcGetCUBIN\0"),
                ptx_size: sym!(b"nvrtcGetPTXSize\0"),
                ptx: sym!(b"nvrtcGetPTX\0"),
                destroy: sym!(b"nvrtcDestroyProgram\0"),
                _lib: lib,
                path: path.to_string(),
                version: (major, minor),
                supported,
                driver,
            })
        }
    }

    /// The NVRTC of this process, chosen and loaded on first use (see the module docs).
    pub(crate) fn get() -> Result<&'static Nvrtc, CudaError> {
        static LOADED: OnceLock<Result<Nvrtc, CudaError>> = OnceLock::new();
        LOADED
            .get_or_init(|| {
                let driver = loaded_driver_version();
                let forced = std::env::var(NVRTC_ENV).ok();
                let tried = nvrtc_candidates(driver, forced.as_deref())?;
                let nvrtc = tried
                    .iter()
                    .find_map(|path| Nvrtc::open(path, driver))
                    .ok_or(CudaError::NoNvrtc { tried: tried.clone(), driver })?;
                check_nvrtc(driver, nvrtc.version, &nvrtc.path)?;
                tracing::debug!(target: "stencil::compile", path = %nvrtc.path, major = nvrtc.version.0,
                    minor = nvrtc.version.1, driver = ?driver, "NVRTC loaded");
                Ok(nvrtc)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// What to compile for a device of compute capability `capability` (see [`code_target`]).
    pub(crate) fn target(&self, capability: (u32, u32)) -> Result<Target, CudaError> {
        code_target(self.driver, self.version, &self.supported, capability)
    }

    /// Compiles `source` with `options`; NVRTC's log goes to `log`. Returns the cubin, or the PTX
    /// with its terminating NUL (both load through `cuModuleLoadData`), as `ptx` asks.
    pub(crate) fn compile(
        &self,
        source: &CStr,
        name: &CStr,
        options: &[String],
        ptx: bool,
        log: &mut String,
    ) -> Result<Vec<u8>, (Option<NvrtcError>, &'static str)> {
        let mut program: Program = std::ptr::null_mut();
        // SAFETY: `source` and `name` are NUL-terminated and outlive the call; no headers.
        let created = unsafe {
            (self.create)(&mut program, source.as_ptr(), name.as_ptr(), 0, std::ptr::null(), std::ptr::null())
        };
        result(created).map_err(|e| (Some(e), "nvrtcCreateProgram"))?;
        struct Guard<'a>(&'a Nvrtc, Program);
        impl Drop for Guard<'_> {
            fn drop(&mut self) {
                // SAFETY: created above, destroyed once.
                unsafe { (self.0.destroy)(&mut self.1) };
            }
        }
        let guard = Guard(self, program);
        let options: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()).map_err(|_| (None, "an option with a NUL byte")))
            .collect::<Result<_, _>>()?;
        let pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        // SAFETY (all calls below): `guard.1` is a live program; the option strings outlive it;
        // every buffer is of the size NVRTC reported.
        let compiled = unsafe { (self.compile)(guard.1, pointers.len() as c_int, pointers.as_ptr()) };
        let mut size = 0usize;
        if result(unsafe { (self.log_size)(guard.1, &mut size) }).is_ok() && size > 0 {
            let mut bytes = vec![0u8; size];
            if result(unsafe { (self.log)(guard.1, bytes.as_mut_ptr().cast()) }).is_ok() {
                let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                *log = String::from_utf8_lossy(&bytes[..end]).into_owned();
            }
        }
        result(compiled).map_err(|e| (Some(e), "nvrtcCompileProgram"))?;
        let (size_fn, get_fn, what) =
            if ptx { (self.ptx_size, self.ptx, "nvrtcGetPTX") } else { (self.cubin_size, self.cubin, "nvrtcGetCUBIN") };
        let mut size = 0usize;
        result(unsafe { size_fn(guard.1, &mut size) }).map_err(|e| (Some(e), what))?;
        if size == 0 {
            return Err((None, what));
        }
        let mut code = vec![0u8; size];
        result(unsafe { get_fn(guard.1, code.as_mut_ptr().cast()) }).map_err(|e| (Some(e), what))?;
        Ok(code)
    }
}

/// The NVRTC this process compiles kernels with (loaded on first use): its version, the library
/// it was loaded from, and the driver's CUDA version it was chosen for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvrtcInfo {
    /// `(major, minor)`, e.g. `(12, 9)`.
    pub version: (i32, i32),
    /// The library name or path it was loaded by (e.g. `libnvrtc.so.13`, or `STENCIL_NVRTC`).
    pub library: String,
    /// The driver's CUDA version as `cuDriverGetVersion` reports it (e.g. 13000), if a driver
    /// could be loaded.
    pub driver: Option<i32>,
}

impl std::fmt::Display for NvrtcInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NVRTC {}.{} ({})", self.version.0, self.version.1, self.library)?;
        match self.driver {
            Some(d) => write!(f, " for the CUDA {} driver", cuda_version(d)),
            None => write!(f, ", no driver loaded"),
        }
    }
}

/// The NVRTC kernels are compiled with, loading it if needed: chosen by the driver's CUDA
/// version (13, then 12 on a CUDA 13 driver; 12 on a CUDA 12 driver), or the library that
/// `STENCIL_NVRTC` names.
pub fn nvrtc_info() -> Result<NvrtcInfo, CudaError> {
    let n = Nvrtc::get()?;
    Ok(NvrtcInfo { version: n.version, library: n.path.clone(), driver: n.driver })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The architectures NVRTC 12.0, 12.8 and 13.0 know (`nvrtcGetSupportedArchs`).
    const NVRTC_12_0: &[i32] = &[50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90];
    const NVRTC_12_8: &[i32] = &[50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 120];
    const NVRTC_13_0: &[i32] = &[75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121];

    fn names(driver: Option<i32>) -> Vec<String> {
        nvrtc_candidates(driver, None).unwrap()
    }

    #[test]
    fn nvrtc_is_chosen_by_the_driver_version() {
        let so = |m: i32| library_name(m);
        let plain = format!("{}nvrtc{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
        for driver in [12000, 12040, 12080] {
            assert_eq!(names(Some(driver)), [so(12), plain.clone()], "driver {driver}");
        }
        assert_eq!(names(Some(13000)), [so(13), so(12), plain.clone()]);
        assert_eq!(names(Some(13020)), [so(13), so(12), plain.clone()]);
        assert_eq!(names(None), [so(13), so(12), plain.clone()], "no driver: compile checks");
        let forced = nvrtc_candidates(Some(13000), Some(" /opt/nvrtc/lib/libnvrtc.so.12 ")).unwrap();
        assert_eq!(forced, ["/opt/nvrtc/lib/libnvrtc.so.12"]);
        assert_eq!(nvrtc_candidates(Some(13000), Some("")).unwrap(), names(Some(13000)), "empty: not forced");
    }

    #[test]
    fn a_driver_older_than_cuda_12_is_refused_naming_both_versions() {
        for forced in [None, Some("libnvrtc.so.12")] {
            let e = nvrtc_candidates(Some(11080), forced).unwrap_err();
            assert_eq!(e.code(), "S0302");
            assert_eq!(e, CudaError::DriverTooOld { version: 11080, required: 12000 });
            let text = e.to_string();
            assert!(text.contains("CUDA 11.8") && text.contains("12.0"), "{text}");
        }
    }

    #[test]
    fn nvrtc_newer_than_the_driver_is_refused() {
        let e = check_nvrtc(Some(12040), (13, 0), "libnvrtc.so.13").unwrap_err();
        assert_eq!(e.code(), "S0324");
        let text = e.to_string();
        for part in ["NVRTC 13.0 (libnvrtc.so.13)", "CUDA 12.4", "STENCIL_NVRTC", "nvidia-cuda-nvrtc-cu12"] {
            assert!(text.contains(part), "{part}: {text}");
        }
        assert!(check_nvrtc(Some(12040), (12, 8), "x").is_ok(), "minor-version compatibility");
        assert!(check_nvrtc(Some(13000), (12, 9), "x").is_ok(), "older NVRTC on a newer driver");
        assert!(check_nvrtc(Some(13000), (13, 0), "x").is_ok());
        assert!(check_nvrtc(None, (13, 0), "x").is_ok());
        assert_eq!(check_nvrtc(None, (11, 8), "x").unwrap_err().code(), "S0324");
    }

    #[test]
    fn code_is_a_cubin_where_nvrtc_knows_the_device_else_ptx_the_driver_accepts() {
        let cubin = |a: &str| Ok(Target::Cubin(a.into()));
        // H100/H200 (9.0) under each driver, with the NVRTC that driver gets.
        assert_eq!(code_target(Some(12000), (12, 0), NVRTC_12_0, (9, 0)), cubin("sm_90"));
        assert_eq!(code_target(Some(12040), (12, 0), NVRTC_12_0, (9, 0)), cubin("sm_90"));
        assert_eq!(code_target(Some(12040), (12, 8), NVRTC_12_8, (9, 0)), cubin("sm_90"), "cubins of 12.8 on 12.4");
        assert_eq!(code_target(Some(12080), (12, 8), NVRTC_12_8, (12, 0)), cubin("sm_120"));
        assert_eq!(code_target(Some(13000), (13, 0), NVRTC_13_0, (9, 0)), cubin("sm_90"));
        assert_eq!(code_target(Some(13000), (12, 9), NVRTC_12_8, (10, 0)), cubin("sm_100"));
        // A device newer than NVRTC knows: PTX, where the driver is as new as NVRTC.
        assert_eq!(code_target(Some(12080), (12, 0), NVRTC_12_0, (12, 0)), Ok(Target::Ptx("compute_90".into())));
        let e = code_target(Some(12040), (12, 8), NVRTC_12_8, (12, 1)).unwrap_err();
        assert_eq!(e.code(), "S0324");
        assert!(e.to_string().contains("needs a driver for CUDA 12.8"), "{e}");
        // A device older than NVRTC knows (Volta under NVRTC 13).
        let e = code_target(Some(13000), (13, 0), NVRTC_13_0, (7, 0)).unwrap_err();
        assert!(e.to_string().contains("cannot compile for this device's sm_70"), "{e}");
        assert_eq!(Target::Ptx("compute_90".into()).arch(), "compute_90");
    }

    #[test]
    fn nvrtc_results_map_onto_cudarc_codes() {
        assert_eq!(result(0), Ok(()));
        assert_eq!(result(6), Err(NvrtcError(nvrtcResult::NVRTC_ERROR_COMPILATION)));
        assert_eq!(result(999), Err(NvrtcError(nvrtcResult::NVRTC_ERROR_INTERNAL_ERROR)));
    }

    #[test]
    fn the_loaded_nvrtc_describes_itself() {
        let info = NvrtcInfo { version: (12, 9), library: "/x/libnvrtc.so.12".into(), driver: Some(13000) };
        assert_eq!(info.to_string(), "NVRTC 12.9 (/x/libnvrtc.so.12) for the CUDA 13.0 driver");
    }
}
