//! Errors as data: every error variant has a stable, unique code and a help sentence, both in
//! `Display`; the codes are the catalogue of `stencil_runtime::error`; wrapped errors are the
//! `source()` of their wrapper. GPU-only errors are built by hand (CI has no GPU).

use std::collections::HashSet;
use std::error::Error as _;
use stencil_runtime::error::{explain, CATALOGUE};
use stencil_runtime::io::IoError;
use stencil_runtime::prelude::*;
use stencil_runtime::{FieldError, HaloError, RangeError};

/// Reads one point to the left along x.
#[stencil]
fn left1(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = f[idx.ix::<-1, 0, 0>()];
}

/// One value of every launch, halo and field error variant.
fn host_errors() -> Vec<LaunchError> {
    vec![
        LaunchError::InvertedRange { stencil: "s", range: "Loop3D[..]".into(), axis: 0 },
        LaunchError::RangeExtent {
            stencil: "s",
            range: "Loop3D[..]".into(),
            axis: 1,
            range_extent: 9,
            field: "f",
            field_extent: 8,
        },
        LaunchError::ShapeMismatch { stencil: "s", first: "f", first_shape: "a".into(), field: "g", shape: "b".into() },
        LaunchError::OutOfBounds { stencil: "s", field: "f", axis: 2, offset: 2, range: (0, 8), halo: 1, extent: 8 },
        LaunchError::WrongDevice { stencil: "s", field: "f", executor: "Gpu(0)".into() },
        LaunchError::CopyShape { source_shape: "a".into(), destination_shape: "b".into() },
        stencil_runtime::DistributionError::SplitColumns { stencil: "s", axis: 2, grid: vec![1, 1, 3] }.into(),
        LaunchError::Range(RangeError::Grow {
            range: "Loop3D[3..8 of 11, 3..8 of 11, 3..8 of 11]".into(),
            by: vec![4, 0, 0],
            axis: 0,
            below: 3,
            above: 3,
            extent: 11,
        }),
        LaunchError::StepPair {
            stencil: "s",
            reason: stencil_runtime::steps::StepPairError::Count { first: 0, second: 1 },
        },
        Loop1D::interior(&Shape1::new([4]).halo(1))
            .split_boundary(BoundaryWidths { lo: [3], hi: [3] })
            .expect_err("6 points of slabs in 4")
            .into(),
        stencil_runtime::revolve::Schedule::binomial(5, 0).expect_err("no slot").into(),
        stencil_runtime::domain::ReachError { stencil: "s", field: "g".into(), fields: vec!["f", "out"] }.into(),
        stencil_runtime::cpu::SettingError {
            variable: "STENCIL_CPU_NT",
            value: "sometimes".into(),
            expected: "auto, on or off",
        }
        .into(),
        LaunchError::Reductions { stencil: "s", expected: 1, given: 2 },
        HaloError::NoSuchAxis { axis: 3, dims: 2 }.into(),
        HaloError::InteriorThinnerThanHalo { axis: 0, n: 1, halo: 2, fill: HaloFill::Periodic }.into(),
        FieldError::LengthMismatch { expected: 4, got: 3 }.into(),
        FieldError::ArrayShapeMismatch { array: vec![2], interior: vec![3] }.into(),
        FieldError::OutOfBounds { coordinate: vec![-5], shape: "s".into() }.into(),
        FieldError::Range(RangeError::DoesNotFit {
            range: "Loop1D[1..9 of 10]".into(),
            shape: "8 + 2*1".into(),
            extent: vec![6],
            axis: 0,
        })
        .into(),
        FieldError::OutOfMemory {
            shape: "2002 x 2002 x 2002 f32".into(),
            bytes: 32_096_096_032,
            available: Some(20 << 30),
        }
        .into(),
    ]
}

#[cfg(feature = "cuda")]
fn cuda_errors() -> Vec<stencil_runtime::CudaError> {
    use stencil_runtime::cuda::{nvrtcResult, CUresult, CudaError, DriverError, NvrtcError};
    let driver = DriverError(CUresult::CUDA_ERROR_INVALID_VALUE);
    vec![
        CudaError::NoDriver { detail: "libcuda.so was not found".into() },
        CudaError::DriverTooOld { version: 11080, required: 12000 },
        CudaError::DriverMismatch {
            during: "cuInit".into(),
            error: DriverError(CUresult::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH),
        },
        CudaError::NoNvrtc { tried: vec!["libnvrtc.so.12".into(), "libnvrtc.so".into()], driver: Some(12040) },
        CudaError::NoDevice { ordinal: 3, count: 1 },
        CudaError::OutOfMemory { bytes: Some(1 << 40), what: "DeviceField".into(), free: Some((1, 2)) },
        CudaError::Compile {
            log: "stencil.cu(3): error: identifier \"b\" is undefined".into(),
            line: Some((3, "a[i] = b;".into())),
            options: vec!["--gpu-architecture=sm_90".into()],
            error: Some(NvrtcError(nvrtcResult::NVRTC_ERROR_COMPILATION)),
        },
        CudaError::MissingEntry { entry: "k".into() },
        CudaError::Nvrtc { during: "nvrtcGetCUBIN", error: NvrtcError(nvrtcResult::NVRTC_ERROR_INVALID_PROGRAM) },
        CudaError::BadBinary { during: "loading".into(), error: DriverError(CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU) },
        CudaError::EmptyBlock { kernel: "k".into(), block: [0, 1, 1] },
        CudaError::LaunchFailed {
            kernel: "k".into(),
            grid: [1, 1, 1],
            block: [2048, 1, 1],
            shared_bytes: 0,
            error: DriverError(CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES),
        },
        CudaError::SharedMemory { kernel: "k".into(), bytes: 1 << 20, error: driver },
        CudaError::KernelFault {
            kernel: "k".into(),
            during: "synchronizing the stream".into(),
            error: DriverError(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
        },
        CudaError::ShapeMismatch { operation: "copy_from", source: "a".into(), destination: "b".into() },
        CudaError::CrossDevice { operation: "copy_from", detail: "Gpu(0) from Gpu(1)".into() },
        CudaError::UnsupportedStrategy { stencil: "s".into(), reason: "needs 3 dimensions".into() },
        CudaError::TooLarge { what: "fill_halos: extent".into(), value: 1 << 32 },
        CudaError::NotRecordable { error: Box::new(CudaError::Driver { during: "download".into(), error: driver }) },
        CudaError::SelfCheck { device: "Gpu(0)".into(), failures: vec!["3 points wrong".into()] },
        CudaError::InvalidArgument(stencil_runtime::cuda::ArgumentError::NulInSource),
        CudaError::Driver { during: "reading the free memory".into(), error: driver },
        CudaError::Nccl { during: "exchanging halo messages".into(), detail: "ncclSystemError".into() },
        CudaError::NvrtcMismatch {
            nvrtc: "NVRTC 13.0 (libnvrtc.so.13)".into(),
            driver: Some(12040),
            reason: "its code needs a driver for CUDA 13.0 or newer".into(),
        },
    ]
}

/// Every error value with a code of its own (wrapper variants report their inner error's code).
fn all_errors() -> Vec<LaunchError> {
    #[allow(unused_mut)]
    let mut all = host_errors();
    #[cfg(feature = "cuda")]
    all.extend(cuda_errors().into_iter().map(LaunchError::Cuda));
    all
}

/// One value of every I/O error variant (its own type: files are not launches).
fn io_errors() -> Vec<IoError> {
    let path = std::path::PathBuf::from("run/state.ckpt");
    vec![
        IoError::Os { path: path.clone(), op: "open", message: "No such file or directory".into() },
        IoError::NotFormat { path: path.clone(), format: ".npy", found: "PK".into() },
        IoError::Unsupported { path: path.clone(), what: "big-endian data".into(), help: "write little-endian".into() },
        IoError::Malformed { path: path.clone(), what: "the header ends early".into() },
        IoError::WrongType { path: path.clone(), name: "u".into(), expected: "f32".into(), found: "f64".into() },
        IoError::WrongShape { path: path.clone(), name: "u".into(), expected: vec![4, 5], found: vec![5, 4] },
        IoError::Checksum { path: path.clone(), what: "field u".into(), recorded: 1, computed: 2 },
        IoError::Mismatch { path: path.clone(), what: "model".into(), expected: "euler".into(), found: "swe".into() },
        IoError::Missing { path: path.clone(), name: "v".into(), available: vec!["u".into()] },
        IoError::Unwritable { path: path.clone(), what: "a name of 300 bytes".into() },
        IoError::MissingParts { path, count: 4, missing: vec![3], written_for: vec![4] },
    ]
}

#[test]
fn every_variant_has_a_unique_documented_code_and_a_help_in_its_message() {
    let all = all_errors();
    let mut codes = HashSet::new();
    for e in &io_errors() {
        let (code, help, text) = (e.code(), e.help(), e.to_string());
        assert!(codes.insert(code), "code {code} of {e:?} is used twice");
        let entry = explain(code).unwrap_or_else(|| panic!("{code} of {e:?} is not in the catalogue"));
        assert!(!help.trim().is_empty() && !entry.fix.is_empty() && !entry.meaning.is_empty(), "{e:?}");
        assert!(text.contains("run/state.ckpt") && text.contains(&format!("[{code}]")), "{text}");
        assert!(text.contains(&format!("help: {help}")), "{text}");
    }
    for e in &all {
        let (code, help, text) = (e.code(), e.help(), e.to_string());
        assert!(codes.insert(code), "code {code} of {e:?} is used twice");
        let entry = explain(code).unwrap_or_else(|| panic!("{code} of {e:?} is not in the catalogue"));
        assert!(!help.trim().is_empty() && !entry.fix.is_empty() && !entry.meaning.is_empty(), "{e:?}");
        assert!(text.starts_with(&e.message()), "{text}");
        assert!(text.contains(&format!("[{code}]")), "{text}");
        assert!(text.contains(&format!("help: {help}")), "{text}");
    }
    // Every catalogue entry is a variant built above (with the `cuda` feature; without it, the
    // CUDA group is what is left).
    let expected: HashSet<&str> =
        CATALOGUE.iter().map(|c| c.code).filter(|c| cfg!(feature = "cuda") || !c.starts_with("S03")).collect();
    assert_eq!(codes, expected);
    let all_codes: HashSet<&str> = CATALOGUE.iter().map(|c| c.code).collect();
    assert_eq!(all_codes.len(), CATALOGUE.len(), "a code appears twice in the catalogue");
}

#[test]
fn wrappers_report_and_chain_the_inner_error() {
    let halo = HaloError::NoSuchAxis { axis: 3, dims: 2 };
    let e = LaunchError::from(halo.clone());
    assert_eq!((e.code(), e.help()), (halo.code(), halo.help()));
    assert_eq!(e.to_string(), halo.to_string());
    assert_eq!(e.source().and_then(|s| s.downcast_ref::<HaloError>()), Some(&halo));

    let field = FieldError::LengthMismatch { expected: 4, got: 3 };
    let e = LaunchError::from(field.clone());
    assert_eq!(e.code(), "S0211");
    assert_eq!(e.source().and_then(|s| s.downcast_ref::<FieldError>()), Some(&field));

    // A refused decomposition is its own code (S0107) and chains to the structured refusal.
    let refusal = stencil_runtime::DistributionError::UnevenRanks { grid: vec![3, 1, 1], subdomains: 3, ranks: 2 };
    let e = LaunchError::from(refusal.clone());
    assert!(matches!(&e, LaunchError::Decomposition(r) if r == &refusal), "{e:?}");
    assert_eq!(e.code(), "S0107");
    assert!(e.to_string().starts_with(&refusal.to_string()), "{e}");
    assert_eq!(e.source().and_then(|s| s.downcast_ref::<stencil_runtime::DistributionError>()), Some(&refusal));

    let own = LaunchError::CopyShape { source_shape: "a".into(), destination_shape: "b".into() };
    assert!(own.source().is_none());
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_errors_keep_the_driver_code_and_chain_to_it() {
    use stencil_runtime::cuda::{nvrtcResult, CUresult, CudaError, DriverError, NvrtcError};
    let fault = CudaError::KernelFault {
        kernel: "k".into(),
        during: "synchronizing the stream".into(),
        error: DriverError(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
    };
    let e = LaunchError::Cuda(CudaError::NotRecordable { error: Box::new(fault.clone()) });
    assert_eq!(e.code(), "S0319");
    // LaunchError -> CudaError::NotRecordable -> CudaError::KernelFault -> DriverError.
    let outer = e.source().and_then(|s| s.downcast_ref::<CudaError>()).expect("CudaError source");
    let inner = outer.source().and_then(|s| s.downcast_ref::<CudaError>()).expect("inner CudaError");
    assert_eq!(inner, &fault);
    let driver = inner.source().and_then(|s| s.downcast_ref::<DriverError>()).expect("DriverError source");
    assert_eq!(driver.0, CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_eq!(outer.driver_result(), Some(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
    assert!(e.to_string().contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{e}");
    assert!(format!("{e:?}").contains("S0319"), "{e:?}");

    let compile = CudaError::Compile {
        log: "stencil.cu(1): error: x".into(),
        line: Some((1, "x".into())),
        options: vec![],
        error: Some(NvrtcError(nvrtcResult::NVRTC_ERROR_COMPILATION)),
    };
    assert_eq!(compile.nvrtc_result(), Some(nvrtcResult::NVRTC_ERROR_COMPILATION));
    assert!(compile.source().and_then(|s| s.downcast_ref::<NvrtcError>()).is_some());
    assert!(compile.to_string().contains("stencil.cu(1): error: x"), "{compile}");

    // A field accessor's error on a device field stays a field error when it becomes a LaunchError.
    let box_outside =
        RangeError::BoxOutside { call: "read_box", at: vec![5], len: vec![4], shape: "s".into(), axis: 0 };
    let range = LaunchError::from(CudaError::Field(FieldError::Range(box_outside.clone())));
    assert_eq!(range, LaunchError::Field(FieldError::Range(box_outside)));
    assert_eq!(range.code(), "S0214");
}

#[test]
fn a_refused_launch_prints_its_code_and_help() {
    let shape = Shape3::new([8, 4, 4]).halo(1);
    let f = Field3::<f32>::zeros(shape);
    let mut out = Field3::<f32>::zeros(shape);
    // The whole extent, halo included: the read one point to the left leaves the field at i = 0.
    let err = Loop3D::from_parts(shape.extent(), [0; 3], [0; 3])
        .run(Left1, (&f, &mut out))
        .expect_err("the launch should be refused");
    assert!(matches!(err, LaunchError::OutOfBounds { field: "f", axis: 0, offset: -1, .. }), "{err:?}");
    assert_eq!(err.code(), "S0104");
    let text = err.to_string();
    assert!(text.starts_with("stencil `left1`: field `f` is read at offset -1"), "{text}");
    // The range runs one point into the halo of 1: the help asks for more than the field has.
    assert!(
        text.contains(
            "[S0104]\nhelp: give `f` a halo of at least 2 along x (i) (the range runs 1 point into the halo)"
        ),
        "{text}"
    );
    assert!(text.contains("start the range at 1 or later"), "{text}");
    assert_eq!(explain(err.code()).map(|c| c.error), Some("Error::OutOfBounds"));
}
