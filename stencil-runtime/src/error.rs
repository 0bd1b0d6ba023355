//! Errors as data: every error of the runtime has a stable code, a message naming what went
//! wrong (the stencil, the field, the numbers) and a help sentence saying what to change.
//!
//! [`Error`] is the runtime's one error type: every executor operation returns it, and every
//! per-area error converts into it with `?` (a [`HaloError`] or [`FieldError`], a
//! [`crate::io::IoError`], a [`crate::RegionError`], a [`crate::revolve::ScheduleError`], a
//! [`crate::domain::ReachError`], a [`crate::DistributionError`] or
//! [`crate::domain::DecompositionError`], a [`crate::RangeError`] or [`crate::SparseError`] and,
//! with the `cuda` feature, a `cuda::CudaError`). A variant wrapping an error type with
//! codes (`Halo`, `Field`, `Cuda`, `Io`) reports the wrapped error's code as its own; the others
//! (`Decomposition`, `Range`, `Region`, `Schedule`, `Reach`) have a code of their own; either
//! way [`std::error::Error::source`] returns the wrapped value. Each error type with codes has
//! `code()`, `message()` and `help()`; `Display` writes
//!
//! ```text
//! <message> [<code>]
//! help: <help>
//! ```
//!
//! # Codes
//!
//! A code is `S` and four digits, `S` + group (two digits) + number (two digits), never reused
//! for another meaning: `S01xx` launch checks ([`Error`]), `S02xx` halo fills and field
//! accessors ([`HaloError`], [`FieldError`]), `S03xx` the CUDA runtime
//! (`cuda::CudaError`), `S04xx` files ([`crate::io::IoError`]). [`explain`] looks a code up in [`CATALOGUE`].
//!
//! | code | error | meaning | fix |
//! |---|---|---|---|
//! | S0101 | `Error::InvertedRange` | an axis of the range ends before it begins (`i0 + i1 > n`) | use `i0 + i1 <= n` on every axis |
//! | S0102 | `Error::RangeExtent` | the range was built for another extent than the fields have | build the range from the field: `Loop3D::interior(f.shape())` |
//! | S0103 | `Error::ShapeMismatch` | two fields of one launch differ in shape | allocate every field of a launch from the same `Shape` |
//! | S0104 | `Error::OutOfBounds` | the range plus the stencil's reach leaves a field | widen the field's halo (`Shape::halo`) or shrink the range |
//! | S0105 | `Error::WrongDevice` | a field of the launch lives on another executor | allocate or upload every field with the executor that runs the launch |
//! | S0106 | `Error::CopyShape` | a copy between fields of different shapes | allocate both fields from the same `Shape` |
//! | S0107 | `Error::Decomposition` | a decomposition, or an exchange over one, that does not fit its fields or executors | what the message names: the process grid, the halo, one field per subdomain of its subdomain's shape |
//! | S0108 | `Error::Range` | `Loop::from_bounds` or `Loop::grow` asked for points outside the extent, sparse points lie outside their region, or a column sweep has too many levels | keep begin <= end <= extent, grow by at most the points outside the range, place sparse points in the region, split a long column launch |
//! | S0109 | `Error::StepPair` | `run_steps_with` or `run_leapfrog_with` got fields, a stencil or a tiling that cannot run several steps per pass | what the message says: the pair's first field as the stencil's input and the second as its one output, an odd number of steps per sweep, a tiling that fits; or the steps one by one |
//! | S0110 | `Error::Region` | a range split into an inner region and slabs wider than the range | slab widths that add up to at most the range's points along each axis |
//! | S0111 | `Error::Schedule` | a checkpointing schedule without a slot | give at least one checkpoint slot |
//! | S0112 | `Error::Reach` | a halo asked for from a stencil's reads of a field it does not have | name the field as the stencil's signature does |
//! | S0113 | `Error::Setting` | a `STENCIL_CPU_*`, `STENCIL_FUSE_SLABS`, `STENCIL_DIRECT_HALOS`, `STENCIL_ONE_ROUND_HALOS` or `STENCIL_PROFILE` environment variable has a value it does not take | use a value the message lists, or unset the variable |
//! | S0114 | `Error::Reductions` | the results of a reduction issued without waiting were folded into another number of reduction parameters than the stencil has | pass the launch's reduction parameters, in order |
//! | S0201 | `HaloError::NoSuchAxis` | a halo fill of an axis the field does not have | use an axis below the field's dimension |
//! | S0202 | `HaloError::InteriorThinnerThanHalo` | the interior has fewer points than the halo has layers | enlarge the interior or use `HaloFill::ZeroGradient` |
//! | S0211 | `FieldError::LengthMismatch` | `Field::from_vec` got the wrong number of values | pass one value per point, halo included |
//! | S0212 | `FieldError::ArrayShapeMismatch` | `Field::from_array` got an array of another shape than the interior | pass an array of the interior's shape |
//! | S0213 | `FieldError::OutOfBounds` | `Field::set` got a coordinate outside the field | use a global coordinate in `-halo ..= n + halo - 1` |
//! | S0214 | `FieldError::Range` | `read_range` got a range that does not fit the field, or `read_box`/`write_box` a box that leaves it | build the range for the field's extent with `i0 + i1 <= n`; keep a box inside the field |
//! | S0215 | `FieldError::OutOfMemory` | the memory for a host field could not be had | a smaller grid, f32, or subdomains on several processes |
//! | S0301 | `CudaError::NoDriver` | `libcuda` is missing or not a working driver | install the NVIDIA driver and check `LD_LIBRARY_PATH` |
//! | S0302 | `CudaError::DriverTooOld` | the driver supports an older CUDA than 12.0 | upgrade the NVIDIA driver to one for CUDA 12.0 or newer |
//! | S0303 | `CudaError::DriverMismatch` | `libcuda` does not match the kernel driver | do not put `/usr/local/cuda/compat` first in `LD_LIBRARY_PATH` |
//! | S0304 | `CudaError::NoNvrtc` | no NVRTC (`libnvrtc.so.13`, `.so.12`) could be loaded | install NVRTC of the driver's CUDA major version (or 12) and put its lib folder in `LD_LIBRARY_PATH`, or set `STENCIL_NVRTC` |
//! | S0305 | `CudaError::NoDevice` | the device ordinal does not exist | use an ordinal below `Gpu::count()` (check `CUDA_VISIBLE_DEVICES`) |
//! | S0306 | `CudaError::OutOfMemory` | the device ran out of memory | use smaller grids or fewer fields, or free device fields first |
//! | S0307 | `CudaError::Compile` | NVRTC rejected a kernel source | fix the source at the line the log names (for a generated kernel, report it) |
//! | S0308 | `CudaError::MissingEntry` | the compiled source has no kernel of the entry's name | declare the kernel `extern "C" __global__` with that name |
//! | S0309 | `CudaError::Nvrtc` | an NVRTC call other than the compilation failed | check the NVRTC installation (version 13 or 12) |
//! | S0310 | `CudaError::BadBinary` | the cubin does not fit this GPU or driver | clear the kernel cache (`$STENCIL_CACHE_DIR`) and update the driver |
//! | S0311 | `CudaError::EmptyBlock` | a launch with a block that has an axis of 0 threads | give every block axis at least one thread |
//! | S0312 | `CudaError::LaunchFailed` | the driver refused a launch (resources, dimensions) | use smaller blocks or fewer registers, within the device limits |
//! | S0313 | `CudaError::SharedMemory` | the kernel cannot use that much dynamic shared memory | ask for less dynamic shared memory (see the device's limit) |
//! | S0314 | `CudaError::KernelFault` | a kernel faulted while running (e.g. an illegal address) | fix the kernel or its arguments, then restart the process |
//! | S0315 | `CudaError::ShapeMismatch` | a host/device copy between different shapes | copy between fields of identical shapes |
//! | S0316 | `CudaError::CrossDevice` | an operation on fields of different `Gpu` handles | use one `Gpu` (clones are fine) or copy through the host |
//! | S0317 | `CudaError::UnsupportedStrategy` | the strategy cannot run this stencil | pick another `Strategy` (or none, for the default) |
//! | S0318 | `CudaError::TooLarge` | a size exceeds the kernels' 32-bit coordinates | split the range or the field into parts below 2³¹ points per axis |
//! | S0319 | `CudaError::NotRecordable` | a recorded step issued work that cannot be recorded | keep downloads, `read_range` and `synchronize` out of recorded steps |
//! | S0320 | `CudaError::SelfCheck` | `cuda::self_check` found wrong results | report it with the device and driver version |
//! | S0321 | `CudaError::InvalidArgument` | a call with arguments that cannot work | change the argument the message names |
//! | S0322 | `CudaError::Driver` | any other driver failure; the `CUresult` is kept | look the driver code up in the CUDA documentation |
//! | S0323 | `CudaError::Nccl` | NCCL could not be loaded or set up, or an NCCL call failed | make `libnccl.so` loadable, one GPU per subdomain, or `STENCIL_TRANSPORT=mpi` |
//! | S0324 | `CudaError::NvrtcMismatch` | the NVRTC found makes code this driver or device cannot run | NVRTC of the driver's CUDA major version or older (12 or newer), through `STENCIL_NVRTC` |
//! | S0401 | `IoError::Os` | the operating system refused to open, read or write a file | check the path, its permissions and the free disk space |
//! | S0402 | `IoError::NotFormat` | the file is not of the format asked for (wrong magic bytes) | pass a file of that format |
//! | S0403 | `IoError::Unsupported` | the file uses what the reader does not take (big-endian data, an element type, a version) | convert the file as the help line says |
//! | S0404 | `IoError::Malformed` | the file is damaged: a header that does not parse, or fewer bytes than it announces | write the file again |
//! | S0405 | `IoError::WrongType` | the file holds another element type than asked for | read it into a field of the file's type, or convert the file |
//! | S0406 | `IoError::WrongShape` | the file's array has another shape than the field or the run | read it into a field of the file's shape |
//! | S0407 | `IoError::Checksum` | stored bytes whose checksum differs from the one recorded with them | the file is corrupt: restart from another checkpoint |
//! | S0408 | `IoError::Mismatch` | a checkpoint of another model, grid, field set, element type or decomposition | restart with the checkpoint's settings, or from a checkpoint of this run |
//! | S0409 | `IoError::Missing` | a variable, field or checkpoint part that is not there | ask for one the file has, or write every part |
//! | S0410 | `IoError::Unwritable` | values a format cannot hold (names, sizes beyond its counts) | shorten the names or split the data |
//! | S0411 | `IoError::MissingParts` | parts of a decomposed checkpoint that are not there | restart with the decomposition it was written with, every part present |

pub use crate::field::{FieldError, HaloError};
#[cfg(feature = "cuda")]
use crate::gpu::cuda::CudaError;
use crate::io::IoError;
use crate::regions::RegionError;
use std::fmt;

/// One entry of the error catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeInfo {
    /// The code, e.g. `S0104`.
    pub code: &'static str,
    /// The error type and variant, e.g. `Error::OutOfBounds`.
    pub error: &'static str,
    /// What the error means.
    pub meaning: &'static str,
    /// What to change.
    pub fix: &'static str,
}

macro_rules! catalogue {
    ($($code:literal $error:literal $meaning:literal $fix:literal;)*) => {
        /// Every code, in order: the table of the [module docs](self).
        pub const CATALOGUE: &[CodeInfo] = &[$(CodeInfo { code: $code, error: $error, meaning: $meaning, fix: $fix }),*];
    };
}

catalogue! {
    "S0101" "Error::InvertedRange" "an axis of the range ends before it begins (i0 + i1 > n)" "use i0 + i1 <= n on every axis";
    "S0102" "Error::RangeExtent" "the range was built for another extent than the fields have" "build the range from the field: Loop3D::interior(f.shape())";
    "S0103" "Error::ShapeMismatch" "two fields of one launch differ in shape" "allocate every field of a launch from the same Shape";
    "S0104" "Error::OutOfBounds" "the range plus the stencil's reach leaves a field" "widen the field's halo (Shape::halo) or shrink the range";
    "S0105" "Error::WrongDevice" "a field of the launch lives on another executor" "allocate or upload every field with the executor that runs the launch";
    "S0106" "Error::CopyShape" "a copy between fields of different shapes" "allocate both fields from the same Shape";
    "S0107" "Error::Decomposition" "a decomposition, or an exchange over one, that does not fit its fields or executors" "what the message names: the process grid, the halo, one field per subdomain of its subdomain's shape";
    "S0108" "Error::Range" "Loop::from_bounds or Loop::grow asked for points outside the extent, sparse points lie outside their region, or a column sweep has too many levels" "keep begin <= end <= extent, grow by at most the points outside the range, place sparse points in the region, split a long column launch";
    "S0109" "Error::StepPair" "run_steps_with or run_leapfrog_with got fields, a stencil or a tiling that cannot run several steps per pass" "what the message says: the pair's first field as the stencil's input and the second as its one output, an odd number of steps per sweep, a tiling that fits; or the steps one by one";
    "S0110" "Error::Region" "a range split into an inner region and slabs wider than the range" "slab widths that add up to at most the range's points along each axis";
    "S0111" "Error::Schedule" "a checkpointing schedule without a slot" "give at least one checkpoint slot";
    "S0112" "Error::Reach" "a halo asked for from a stencil's reads of a field it does not have" "name the field as the stencil's signature does";
    "S0113" "Error::Setting" "a STENCIL_CPU_*, STENCIL_FUSE_SLABS, STENCIL_DIRECT_HALOS, STENCIL_ONE_ROUND_HALOS or STENCIL_PROFILE environment variable has a value it does not take" "use a value the message lists, or unset the variable";
    "S0114" "Error::Reductions" "the results of a reduction issued without waiting were folded into another number of reduction parameters than the stencil has" "pass the launch's reduction parameters, in order";
    "S0201" "HaloError::NoSuchAxis" "a halo fill of an axis the field does not have" "use an axis below the field's dimension";
    "S0202" "HaloError::InteriorThinnerThanHalo" "the interior has fewer points than the halo has layers" "enlarge the interior or use HaloFill::ZeroGradient";
    "S0211" "FieldError::LengthMismatch" "Field::from_vec got the wrong number of values" "pass one value per point, halo included";
    "S0212" "FieldError::ArrayShapeMismatch" "Field::from_array got an array of another shape than the interior" "pass an array of the interior's shape";
    "S0213" "FieldError::OutOfBounds" "Field::set got a coordinate outside the field" "use a global coordinate in -halo ..= n + halo - 1";
    "S0214" "FieldError::Range" "read_range got a range that does not fit the field, or read_box/write_box a box that leaves it" "build the range for the field's extent with i0 + i1 <= n; keep a box inside the field";
    "S0215" "FieldError::OutOfMemory" "the memory for a host field could not be had" "a smaller grid, f32, or subdomains on several processes";
    "S0301" "CudaError::NoDriver" "libcuda is missing or not a working driver" "install the NVIDIA driver and check LD_LIBRARY_PATH";
    "S0302" "CudaError::DriverTooOld" "the driver supports an older CUDA than 12.0" "upgrade the NVIDIA driver to one for CUDA 12.0 or newer";
    "S0303" "CudaError::DriverMismatch" "libcuda does not match the kernel driver" "do not put /usr/local/cuda/compat first in LD_LIBRARY_PATH";
    "S0304" "CudaError::NoNvrtc" "no NVRTC (libnvrtc.so.13, .so.12) could be loaded" "install NVRTC of the driver's CUDA major version (or 12) and put its lib folder in LD_LIBRARY_PATH, or set STENCIL_NVRTC";
    "S0305" "CudaError::NoDevice" "the device ordinal does not exist" "use an ordinal below Gpu::count() (check CUDA_VISIBLE_DEVICES)";
    "S0306" "CudaError::OutOfMemory" "the device ran out of memory" "use smaller grids or fewer fields, or free device fields first";
    "S0307" "CudaError::Compile" "NVRTC rejected a kernel source" "fix the source at the line the log names (for a generated kernel, report it)";
    "S0308" "CudaError::MissingEntry" "the compiled source has no kernel of the entry's name" "declare the kernel extern \"C\" __global__ with that name";
    "S0309" "CudaError::Nvrtc" "an NVRTC call other than the compilation failed" "check the NVRTC installation (version 13 or 12)";
    "S0310" "CudaError::BadBinary" "the cubin does not fit this GPU or driver" "clear the kernel cache ($STENCIL_CACHE_DIR) and update the driver";
    "S0311" "CudaError::EmptyBlock" "a launch with a block that has an axis of 0 threads" "give every block axis at least one thread";
    "S0312" "CudaError::LaunchFailed" "the driver refused a launch (resources, dimensions)" "use smaller blocks or fewer registers, within the device limits";
    "S0313" "CudaError::SharedMemory" "the kernel cannot use that much dynamic shared memory" "ask for less dynamic shared memory (see the device's limit)";
    "S0314" "CudaError::KernelFault" "a kernel faulted while running (e.g. an illegal address)" "fix the kernel or its arguments, then restart the process";
    "S0315" "CudaError::ShapeMismatch" "a host/device copy between different shapes" "copy between fields of identical shapes";
    "S0316" "CudaError::CrossDevice" "an operation on fields of different Gpu handles" "use one Gpu (clones are fine) or copy through the host";
    "S0317" "CudaError::UnsupportedStrategy" "the strategy cannot run this stencil" "pick another Strategy (or none, for the default)";
    "S0318" "CudaError::TooLarge" "a size exceeds the kernels' 32-bit coordinates" "split the range or the field into parts below 2^31 points per axis";
    "S0319" "CudaError::NotRecordable" "a recorded step issued work that cannot be recorded" "keep downloads, read_range and synchronize out of recorded steps";
    "S0320" "CudaError::SelfCheck" "cuda::self_check found wrong results" "report it with the device and driver version";
    "S0321" "CudaError::InvalidArgument" "a call with arguments that cannot work" "change the argument the message names";
    "S0322" "CudaError::Driver" "any other driver failure; the CUresult is kept" "look the driver code up in the CUDA documentation";
    "S0323" "CudaError::Nccl" "NCCL could not be loaded or set up, or an NCCL call failed" "make libnccl.so loadable, one GPU per subdomain, or STENCIL_TRANSPORT=mpi";
    "S0324" "CudaError::NvrtcMismatch" "the NVRTC found makes code this driver or device cannot run" "NVRTC of the driver's CUDA major version or older (12 or newer), through STENCIL_NVRTC";
    "S0401" "IoError::Os" "the operating system refused to open, read or write a file" "check the path, its permissions and the free disk space";
    "S0402" "IoError::NotFormat" "the file is not of the format asked for (wrong magic bytes)" "pass a file of that format";
    "S0403" "IoError::Unsupported" "the file uses what the reader does not take (big-endian data, an element type, a version)" "convert the file as the help line says";
    "S0404" "IoError::Malformed" "the file is damaged: a header that does not parse, or fewer bytes than it announces" "write the file again";
    "S0405" "IoError::WrongType" "the file holds another element type than asked for" "read it into a field of the file's type, or convert the file";
    "S0406" "IoError::WrongShape" "the file's array has another shape than the field or the run" "read it into a field of the file's shape";
    "S0407" "IoError::Checksum" "stored bytes whose checksum differs from the one recorded with them" "the file is corrupt: restart from another checkpoint";
    "S0408" "IoError::Mismatch" "a checkpoint of another model, grid, field set, element type or decomposition" "restart with the checkpoint's settings, or from a checkpoint of this run";
    "S0409" "IoError::Missing" "a variable, field or checkpoint part that is not there" "ask for one the file has, or write every part";
    "S0410" "IoError::Unwritable" "values a format cannot hold (names, sizes beyond its counts)" "shorten the names or split the data";
    "S0411" "IoError::MissingParts" "parts of a decomposed checkpoint that are not there" "restart with the decomposition it was written with, every part present";
}

/// The catalogue entry of `code` (e.g. `explain("S0104")`), or `None` for an unknown code.
pub fn explain(code: &str) -> Option<&'static CodeInfo> {
    CATALOGUE.iter().find(|c| c.code.eq_ignore_ascii_case(code.trim()))
}

const AXES: [&str; 3] = ["x (i)", "y (j)", "z (k)"];

/// The runtime's error: why a launch (or another executor operation, a file, a schedule) was
/// refused or failed. Nothing was written when a launch returns one of the checks' errors.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// An axis of the range ends before it begins (`i0 + i1 > n`).
    InvertedRange {
        /// The stencil.
        stencil: &'static str,
        /// The range, described.
        range: String,
        /// The axis.
        axis: usize,
    },
    /// The range was built for another extent than the fields have.
    RangeExtent {
        /// The stencil.
        stencil: &'static str,
        /// The range, described.
        range: String,
        /// The axis.
        axis: usize,
        /// The range's `n` on that axis.
        range_extent: usize,
        /// The field compared.
        field: &'static str,
        /// The field's extent on that axis (interior + 2 halo).
        field_extent: usize,
    },
    /// Two fields of one launch differ in shape (size, halo, order or alignment).
    ShapeMismatch {
        /// The stencil.
        stencil: &'static str,
        /// The first field.
        first: &'static str,
        /// Its shape.
        first_shape: String,
        /// The field that differs.
        field: &'static str,
        /// Its shape.
        shape: String,
    },
    /// The range plus the stencil's reach leaves the field (its halo is too narrow).
    OutOfBounds {
        /// The stencil.
        stencil: &'static str,
        /// The field.
        field: &'static str,
        /// The axis.
        axis: usize,
        /// The offset that reaches outside (negative: low side).
        offset: i32,
        /// The range on that axis, storage coordinates, half-open.
        range: (usize, usize),
        /// The field's halo on that axis.
        halo: usize,
        /// The field's extent on that axis.
        extent: usize,
    },
    /// A field of the launch lives on another executor (another GPU, or the host).
    WrongDevice {
        /// The stencil.
        stencil: &'static str,
        /// The field.
        field: &'static str,
        /// The executor launched on.
        executor: String,
    },
    /// A copy between fields of different shapes.
    CopyShape {
        /// Shape of the field copied from.
        source_shape: String,
        /// Shape of the field copied to.
        destination_shape: String,
    },
    /// A decomposition, or a halo exchange over one, that does not fit (process grid, halo,
    /// executors or fields): what was given and what fits.
    Decomposition(crate::domain::DistributionError),
    /// A range built from bounds outside its extent, sparse points outside their region, or a
    /// column sweep over too many levels ([`crate::RangeError`]).
    Range(crate::range::RangeError),
    /// Several steps per pass (`Host::run_steps_with`, `Host::run_leapfrog_with`,
    /// `Gpu::run_steps_with`) with fields the arguments do not use in their roles, of a stencil
    /// that cannot run so, or with a tiling that does not fit.
    StepPair {
        /// The stencil.
        stencil: &'static str,
        /// What is wrong, and what to change.
        reason: crate::gpu::steps::StepPairError,
    },
    /// A halo fill that cannot work (axis, or an interior thinner than the halo). Reports the
    /// [`HaloError`]'s code.
    Halo(HaloError),
    /// Misuse of a field accessor (e.g. `read_range` with a range that does not fit). Reports the
    /// [`FieldError`]'s code.
    Field(FieldError),
    /// The CUDA executor failed (compile, launch, memory). Reports the [`CudaError`]'s code.
    #[cfg(feature = "cuda")]
    Cuda(CudaError),
    /// Reading or writing a file failed. Reports the [`IoError`]'s code.
    Io(IoError),
    /// A range cannot be split into an inner region and slabs of the widths asked for.
    Region(RegionError),
    /// A checkpointing schedule cannot be made.
    Schedule(ScheduleError),
    /// A stencil has no field of the name a halo was asked for.
    Reach(ReachError),
    /// A `STENCIL_CPU_*`, `STENCIL_FUSE_SLABS`, `STENCIL_DIRECT_HALOS`, `STENCIL_ONE_ROUND_HALOS` or `STENCIL_PROFILE` environment variable has
    /// a value it does not take (every launch that reads it reports it).
    Setting(crate::cpu::SettingError),
    /// [`Reduced::fold_into`](crate::Reduced::fold_into) got another number of reduction
    /// parameters than the stencil has.
    Reductions {
        /// The stencil.
        stencil: &'static str,
        /// Its reduction parameters.
        expected: usize,
        /// The reducers given.
        given: usize,
    },
}

/// The name [`Error`] had before it took in every per-area error: the same type.
pub type LaunchError = Error;

impl Error {
    /// The error's stable code (see the [catalogue](self)); a wrapping variant reports the wrapped
    /// error's code.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvertedRange { .. } => "S0101",
            Error::RangeExtent { .. } => "S0102",
            Error::ShapeMismatch { .. } => "S0103",
            Error::OutOfBounds { .. } => "S0104",
            Error::WrongDevice { .. } => "S0105",
            Error::CopyShape { .. } => "S0106",
            Error::Decomposition(_) => "S0107",
            Error::Range(_) => "S0108",
            Error::StepPair { .. } => "S0109",
            Error::Halo(e) => e.code(),
            Error::Field(e) => e.code(),
            #[cfg(feature = "cuda")]
            Error::Cuda(e) => e.code(),
            Error::Io(e) => e.code(),
            Error::Region(_) => "S0110",
            Error::Schedule(_) => "S0111",
            Error::Reach(_) => "S0112",
            Error::Setting(_) => "S0113",
            Error::Reductions { .. } => "S0114",
        }
    }

    /// What went wrong, naming the stencil, the field and the numbers; without code and help.
    pub fn message(&self) -> String {
        match self {
            Error::InvertedRange { stencil, range, axis } => format!(
                "stencil `{stencil}`: range {range} is inverted along {}: i0 + i1 exceeds n",
                AXES[*axis]
            ),
            Error::RangeExtent { stencil, range, axis, range_extent, field, field_extent } => format!(
                "stencil `{stencil}`: range {range} was built for n = {range_extent} along {}, but field `{field}` has extent {field_extent} there (interior + 2 * halo)",
                AXES[*axis]
            ),
            Error::ShapeMismatch { stencil, first, first_shape, field, shape } => format!(
                "stencil `{stencil}`: fields of one launch must share one shape, but `{first}` is {first_shape} and `{field}` is {shape}"
            ),
            Error::OutOfBounds { stencil, field, axis, offset, range, halo, extent } => format!(
                "stencil `{stencil}`: field `{field}` is read at offset {offset} along {} over the range {}..{} but has halo {halo} (extent {extent}): the read leaves the field",
                AXES[*axis], range.0, range.1
            ),
            Error::WrongDevice { stencil, field, executor } => {
                format!("stencil `{stencil}`: field `{field}` does not live on {executor}")
            }
            Error::CopyShape { source_shape, destination_shape } => format!(
                "copy: source shape ({source_shape}) differs from destination shape ({destination_shape})"
            ),
            Error::Decomposition(e) => e.to_string(),
            Error::Range(e) => e.to_string(),
            Error::StepPair { stencil, reason } => format!("stencil `{stencil}`, run_steps: {reason}"),
            Error::Halo(e) => e.message(),
            Error::Field(e) => e.message(),
            #[cfg(feature = "cuda")]
            Error::Cuda(e) => e.message(),
            Error::Io(e) => e.message(),
            Error::Region(e) => e.to_string(),
            Error::Schedule(e) => e.to_string(),
            Error::Reach(e) => e.to_string(),
            Error::Setting(e) => e.to_string(),
            Error::Reductions { stencil, expected, given } => format!(
                "stencil `{stencil}` has {expected} reduction parameter(s), but its results were folded into {given}"
            ),
        }
    }

    /// What to change, with the numbers of this error where they help.
    pub fn help(&self) -> String {
        match self {
            Error::InvertedRange { .. } => "use i0 + i1 <= n along every axis".to_string(),
            Error::RangeExtent { range, field, .. } => format!(
                "build the range from the field, e.g. `{}::interior({field}.shape())`",
                range.split('[').next().unwrap_or("Loop3D")
            ),
            Error::ShapeMismatch { .. } => "allocate them from the same `Shape`".to_string(),
            Error::OutOfBounds { field, axis, offset, range, halo, extent, .. } => {
                let need = offset.unsigned_abs() as usize;
                // Points of the range inside the halo on the side the read leaves by: the halo
                // must hold the reach beyond them.
                let beyond =
                    if *offset < 0 { halo.saturating_sub(range.0) } else { range.1.saturating_sub(extent - halo) };
                let halo_needed = need + beyond;
                let fix_range = if *offset < 0 {
                    format!("start the range at {need} or later")
                } else if need < *extent {
                    format!("end it at {} or earlier", extent - need)
                } else {
                    format!("make the field longer than {need} along that axis")
                };
                let inside = if beyond > 0 {
                    format!(" (the range runs {beyond} point{} into the halo)", if beyond == 1 { "" } else { "s" })
                } else {
                    String::new()
                };
                format!(
                    "give `{field}` a halo of at least {halo_needed} along {}{inside} (`Shape::halo`) or {fix_range}",
                    AXES[*axis]
                )
            }
            Error::WrongDevice { executor, .. } => format!(
                "allocate or upload the field with {executor} (every field of a launch on the executor that runs it)"
            ),
            Error::CopyShape { .. } => "allocate both from the same `Shape`".to_string(),
            Error::Decomposition(_) => {
                "change what the message names (process grid, halo, fields per subdomain)".to_string()
            }
            Error::Range(e) => {
                use crate::range::RangeError as R;
                match e {
                    R::Sparse(_) => "place every point inside the region, from its first node to its last, in a \
                                     non-empty region with a spacing > 0"
                        .to_string(),
                    R::ColumnLevels { limit, .. } => {
                        format!("split the launch into ranges of at most {limit} levels along the column axis")
                    }
                    R::BoxOutside { .. } => {
                        "keep the box inside the field: at + len <= extent on every axis (halo included)".to_string()
                    }
                    _ => "keep begin <= end <= extent; grow by at most the points outside the range".to_string(),
                }
            }
            Error::StepPair { .. } => "do what the message says: pass the pair's first field where the stencil \
                reads its input and the second where it writes its one output (`|a, b, _| (c, a, b)`), use an odd \
                number of steps per sweep on a GPU and a tiling that fits; or run the steps one by one (tiling `None`)"
                .to_string(),
            Error::Halo(e) => e.help(),
            Error::Field(e) => e.help(),
            #[cfg(feature = "cuda")]
            Error::Cuda(e) => e.help(),
            Error::Io(e) => e.help(),
            Error::Region(_) => "use slab widths that add up to at most the range's points along each axis".to_string(),
            Error::Schedule(_) => "give at least one checkpoint slot".to_string(),
            Error::Reach(e) => format!("name one of the stencil's fields: {}", e.fields.join(", ")),
            Error::Setting(e) => format!("set {} to one of the values it takes, or unset it", e.variable),
            Error::Reductions { expected, .. } => {
                format!("pass the launch's {expected} reduction parameter(s) to `fold_into`, in parameter order")
            }
        }
    }
}

impl From<crate::domain::DecompositionError> for Error {
    fn from(e: crate::domain::DecompositionError) -> Self {
        Error::Decomposition(e.into())
    }
}

impl From<crate::domain::DistributionError> for Error {
    fn from(e: crate::domain::DistributionError) -> Self {
        Error::Decomposition(e)
    }
}

impl From<crate::range::RangeError> for Error {
    fn from(e: crate::range::RangeError) -> Self {
        Error::Range(e)
    }
}

impl From<crate::range::SparseError> for Error {
    fn from(e: crate::range::SparseError) -> Self {
        Error::Range(e.into())
    }
}

impl From<HaloError> for Error {
    fn from(e: HaloError) -> Self {
        Error::Halo(e)
    }
}

impl From<FieldError> for Error {
    fn from(e: FieldError) -> Self {
        Error::Field(e)
    }
}

#[cfg(feature = "cuda")]
impl From<CudaError> for Error {
    /// A CUDA error, except that a field accessor's error stays a [`Error::Field`].
    fn from(e: CudaError) -> Self {
        match e {
            CudaError::Field(e) => Error::Field(e),
            e => Error::Cuda(e),
        }
    }
}

impl From<IoError> for Error {
    /// A file error, except that a field accessor's error stays an [`Error::Field`].
    fn from(e: IoError) -> Self {
        match e {
            IoError::Field(e) => Error::Field(e),
            e => Error::Io(e),
        }
    }
}

impl From<RegionError> for Error {
    fn from(e: RegionError) -> Self {
        Error::Region(e)
    }
}

impl From<ScheduleError> for Error {
    fn from(e: ScheduleError) -> Self {
        Error::Schedule(e)
    }
}

impl From<ReachError> for Error {
    fn from(e: ReachError) -> Self {
        Error::Reach(e)
    }
}

impl From<crate::cpu::SettingError> for Error {
    fn from(e: crate::cpu::SettingError) -> Self {
        Error::Setting(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Halo(e) => write!(f, "{e}"),
            Error::Field(e) => write!(f, "{e}"),
            #[cfg(feature = "cuda")]
            Error::Cuda(e) => write!(f, "{e}"),
            Error::Io(e) => write!(f, "{e}"),
            _ => write!(f, "{} [{}]\nhelp: {}", self.message(), self.code(), self.help()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Halo(e) => Some(e),
            Error::Field(e) => Some(e),
            #[cfg(feature = "cuda")]
            Error::Cuda(e) => Some(e),
            Error::Io(e) => Some(e),
            Error::Decomposition(e) => Some(e),
            Error::Range(e) => Some(e),
            Error::Region(e) => Some(e),
            Error::Schedule(e) => Some(e),
            Error::Reach(e) => Some(e),
            Error::Setting(e) => Some(e),
            _ => None,
        }
    }
}

/// A stencil has no field parameter of the name given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReachError {
    /// The stencil.
    pub stencil: &'static str,
    /// The name asked for.
    pub field: String,
    /// Its field parameters.
    pub fields: Vec<&'static str>,
}

impl fmt::Display for ReachError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stencil `{}` has no field parameter `{}`; its fields are {:?}: name the parameter as the stencil's \
             signature does",
            self.stencil, self.field, self.fields
        )
    }
}

impl std::error::Error for ReachError {}

/// Why no schedule was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleError {
    /// No checkpoint slot for a run of at least one step: the initial state needs one.
    NoSlot {
        /// The steps asked for.
        steps: usize,
    },
    /// A memory budget smaller than one state ([`crate::revolve::Schedule::within`]).
    Budget {
        /// The steps asked for.
        steps: usize,
        /// The budget, bytes.
        budget: usize,
        /// The bytes of one state.
        state: usize,
    },
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScheduleError::NoSlot { steps } => write!(
                f,
                "a checkpointing schedule of {steps} steps needs at least one checkpoint slot (it holds the \
                 initial state): give 1 or more"
            ),
            ScheduleError::Budget { steps, budget, state } => write!(
                f,
                "a checkpointing budget of {budget} bytes holds no state of {state} bytes, and a schedule of {steps} \
                 steps needs one (the initial state): give at least {state} bytes"
            ),
        }
    }
}

impl std::error::Error for ScheduleError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_codes_are_unique_well_formed_and_documented() {
        let docs = include_str!("error.rs");
        let mut seen = std::collections::HashSet::new();
        for c in CATALOGUE {
            assert!(seen.insert(c.code), "{} twice", c.code);
            assert!(c.code.len() == 5 && c.code.starts_with('S') && c.code[1..].bytes().all(|b| b.is_ascii_digit()));
            assert!(docs.contains(&format!("//! | {} | `{}` |", c.code, c.error)), "{} not in the docs' table", c.code);
            assert!(!c.meaning.is_empty() && !c.fix.is_empty());
            assert_eq!(explain(&c.code.to_lowercase()), Some(c));
        }
        let table_rows = docs.lines().filter(|l| l.starts_with("//! | S0")).count();
        assert_eq!(table_rows, CATALOGUE.len(), "the docs' table and CATALOGUE differ");
        assert_eq!(explain("S9999"), None);
    }

    /// Every per-area error converts into [`Error`] with `?`, keeping its code and value.
    #[test]
    fn per_area_errors_convert_with_question_mark() {
        fn lift<E>(e: E) -> Result<(), Error>
        where
            Error: From<E>,
        {
            Err(e)?
        }
        let region = crate::Loop1D::interior(&crate::Shape1::new([4]).halo(1))
            .split_boundary(crate::BoundaryWidths { lo: [3], hi: [3] })
            .expect_err("6 points of slabs in 4");
        let schedule = crate::revolve::Schedule::binomial(5, 0).expect_err("no slot");
        let io = crate::io::IoError::Os { path: "/nowhere".into(), op: "read", message: "not found".into() };
        let field = crate::Field1::<f32>::from_vec(crate::Shape1::new([4]), vec![0.0; 3]).expect_err("3 of 6 values");
        for (e, code, source) in [
            (lift(region.clone()).unwrap_err(), "S0110", region.to_string()),
            (lift(schedule.clone()).unwrap_err(), "S0111", schedule.to_string()),
            (lift(io.clone()).unwrap_err(), io.code(), io.to_string()),
            (lift(field.clone()).unwrap_err(), field.code(), field.to_string()),
        ] {
            assert_eq!(e.code(), code, "{e}");
            assert!(e.to_string().contains(&source[..source.len().min(30)]), "{e} / {source}");
            let wrapped = std::error::Error::source(&e).map(|s| s.to_string());
            assert_eq!(wrapped.as_deref(), Some(source.as_str()));
            assert_eq!(explain(code).map(|c| c.code), Some(code));
        }
        // A file error that is a field accessor's stays a field error.
        let lifted = lift(crate::io::IoError::Field(field.clone())).unwrap_err();
        assert_eq!(lifted, Error::Field(field));
    }
}
