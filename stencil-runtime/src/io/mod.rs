//! Fields to and from files: numpy's `.npy` ([`npy`]), NetCDF classic (`netcdf`, cargo feature
//! `netcdf`) and checkpoints of a model's whole state ([`checkpoint`]). One module per format;
//! the errors of all of them are an [`IoError`] (codes `S04xx`).
//!
//! # Axis convention
//!
//! A field's global index `[i, j, k]` (`i` along x) is numpy's index `a[i, j, k]` in every
//! format: axis 0 of the array is the field's axis 0, whatever the field's [`Order`](crate::Order).
//! What the order changes is only how the values lie in the file:
//!
//! - `.npy` of an `Order::Ijk` field (and of any 1D field) is written with numpy's
//!   `fortran_order: True` (`i` fastest, as in memory), row by row straight from the field's
//!   storage; `np.load` gives an F-contiguous array `a` with `a[i, j, k] == field.get([i, j, k])`.
//! - `.npy` of an `Order::Kij` 2D field is C order (`j` fastest, as in memory), written the same
//!   way; a `Kij` 3D field (`k`, then `i`, then `j`) matches neither of numpy's orders and is
//!   written in C order through a copy.
//! - NetCDF variables are written with dimensions `(z, y, x)` (C order, `x` fastest, as CF and
//!   ncdump expect), so the variable's array in numpy/scipy is `v[k, j, i]`: reversed from the
//!   `.npy` convention; the reader reverses it back.
//!
//! ```
//! use stencil_runtime::io::npy;
//! use stencil_runtime::prelude::*;
//!
//! let dir = std::env::temp_dir().join(format!("stencil-io-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("u.npy");
//! let u = Field3::from_fn(Shape3::new([4, 3, 2]).halo(1), |[i, j, k]| (100 * i + 10 * j + k) as f32);
//! npy::write(&path, &u)?;                                   // numpy: np.load(path)[i, j, k]
//! let v: Field3<f32> = npy::read(&path, 2)?;                // the same interior, halo 2
//! assert_eq!(v.get([3, 2, 1]), Some(321.0));
//! let view = v.interior_view();                             // ndarray view, no copy
//! assert_eq!(view[[3, 2, 1]], 321.0);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), stencil_runtime::io::IoError>(())
//! ```

pub mod checkpoint;
#[cfg(feature = "netcdf")]
pub mod netcdf;
pub mod npy;

use crate::field::{Element, Field, FieldError};
use std::fmt;
use std::path::{Path, PathBuf};

/// The element types the file formats store: `f32`, `f64`, `i32`, `u32` (sealed).
pub trait IoElement: Element + sealed::Sealed {
    /// numpy's little-endian type string (`<f4`, `<f8`, `<i4`, `<u4`).
    const NPY: &'static str;
    /// A one-byte tag of the type in checkpoints.
    const TAG: u8;
    /// The NetCDF classic type (`NC_FLOAT` 5, `NC_DOUBLE` 6, `NC_INT` 4); `None` for `u32`,
    /// which the classic formats do not have.
    const NC_TYPE: Option<u32>;
    /// Appends the value's bytes, big-endian if `big`.
    fn put(self, big: bool, out: &mut Vec<u8>);
    /// The value of `bytes` (exactly the type's size), big-endian if `big`.
    fn get(bytes: &[u8], big: bool) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i32 {}
    impl Sealed for u32 {}
}

macro_rules! io_element {
    ($t:ty, $npy:literal, $tag:literal, $nc:expr) => {
        impl IoElement for $t {
            const NPY: &'static str = $npy;
            const TAG: u8 = $tag;
            const NC_TYPE: Option<u32> = $nc;
            fn put(self, big: bool, out: &mut Vec<u8>) {
                out.extend_from_slice(&if big { self.to_be_bytes() } else { self.to_le_bytes() });
            }
            fn get(bytes: &[u8], big: bool) -> Self {
                let b = bytes.try_into().expect("one element's bytes");
                if big {
                    <$t>::from_be_bytes(b)
                } else {
                    <$t>::from_le_bytes(b)
                }
            }
        }
    };
}
io_element!(f32, "<f4", 1, Some(5));
io_element!(f64, "<f8", 2, Some(6));
io_element!(i32, "<i4", 3, Some(4));
io_element!(u32, "<u4", 4, None);

/// The DSL name of a checkpoint type tag (for messages).
pub(crate) fn tag_name(tag: u8) -> String {
    match tag {
        1 => "f32".into(),
        2 => "f64".into(),
        3 => "i32".into(),
        4 => "u32".into(),
        t => format!("unknown type tag {t}"),
    }
}

/// The bytes of `values`, big-endian if `big`: straight from memory when that is the machine's
/// byte order.
pub(crate) fn to_bytes<T: IoElement>(values: &[T], big: bool) -> std::borrow::Cow<'_, [u8]> {
    if big == cfg!(target_endian = "big") {
        // SAFETY: the sealed types are plain 4- or 8-byte scalars without padding.
        std::borrow::Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values))
        })
    } else {
        let mut out = Vec::with_capacity(std::mem::size_of_val(values));
        values.iter().for_each(|v| v.put(big, &mut out));
        std::borrow::Cow::Owned(out)
    }
}

/// Reads `out.len()` values, big-endian if `big`: straight into `out` when that is the
/// machine's byte order.
pub(crate) fn read_values<T: IoElement, R: std::io::Read>(
    input: &mut Input<R>,
    out: &mut [T],
    big: bool,
    what: &str,
) -> Result<(), IoError> {
    if big == cfg!(target_endian = "big") {
        // SAFETY: the sealed types are plain scalars for which every bit pattern is a value.
        let bytes = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, std::mem::size_of_val(out)) };
        input.exact(bytes, what)
    } else {
        let bytes = input.bytes(std::mem::size_of_val(out), what)?;
        from_bytes(&bytes, out, big);
        Ok(())
    }
}

/// Fills `out` from `bytes` (exactly `out`'s size), big-endian if `big`.
pub(crate) fn from_bytes<T: IoElement>(bytes: &[u8], out: &mut [T], big: bool) {
    assert_eq!(bytes.len(), std::mem::size_of_val(out), "one value's bytes per value");
    if big == cfg!(target_endian = "big") {
        // SAFETY: as in `read_values`; the lengths are equal.
        let dst = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, bytes.len()) };
        dst.copy_from_slice(bytes);
    } else {
        for (v, b) in out.iter_mut().zip(bytes.chunks_exact(std::mem::size_of::<T>())) {
            *v = T::get(b, big);
        }
    }
}

/// 64-bit FNV-1a of `bytes`, continuing from `hash` (start with [`FNV_START`]).
pub(crate) fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= b as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// FNV-1a's offset basis.
pub(crate) const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// Why a file could not be read or written. `Display` writes the message naming the file, what
/// was expected and what was found, the code and a `help:` line, as the runtime's other errors.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IoError {
    /// The operating system refused (missing file, permissions, full disk).
    Os {
        /// The file.
        path: PathBuf,
        /// What was being done (`open`, `read`, `write`, `create`).
        op: &'static str,
        /// The system's message.
        message: String,
    },
    /// The file is not of the format (wrong magic bytes).
    NotFormat {
        /// The file.
        path: PathBuf,
        /// The format expected (`.npy`, `NetCDF classic`, `checkpoint`).
        format: &'static str,
        /// What the file starts with.
        found: String,
    },
    /// A valid file of the format using a feature this reader does not support (big-endian
    /// data, an element type, a format version).
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is not supported, and what the file has.
        what: String,
        /// What to change.
        help: String,
    },
    /// The file is damaged: a header that does not parse, or fewer bytes than it announces.
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// The file holds another element type than asked for.
    WrongType {
        /// The file.
        path: PathBuf,
        /// The variable or field (empty for a `.npy` file).
        name: String,
        /// The type asked for.
        expected: String,
        /// The type in the file.
        found: String,
    },
    /// The file's array has another shape than the field it is read into, or than the run.
    WrongShape {
        /// The file.
        path: PathBuf,
        /// The variable or field (empty for a `.npy` file).
        name: String,
        /// The shape expected (interior, numpy axis order).
        expected: Vec<usize>,
        /// The shape in the file.
        found: Vec<usize>,
    },
    /// Stored bytes whose checksum is not the one recorded with them: the file was damaged.
    Checksum {
        /// The file.
        path: PathBuf,
        /// What the checksum covers.
        what: String,
        /// The checksum recorded.
        recorded: u64,
        /// The checksum of the bytes read.
        computed: u64,
    },
    /// A checkpoint that does not fit the run restarting from it (another model, grid, field
    /// set, element type or decomposition).
    Mismatch {
        /// The file.
        path: PathBuf,
        /// What differs (e.g. `model`, `global grid`, `field set`).
        what: String,
        /// What the run has.
        expected: String,
        /// What the checkpoint has.
        found: String,
    },
    /// A variable or field that is not in the file.
    Missing {
        /// The file.
        path: PathBuf,
        /// The name asked for.
        name: String,
        /// The names the file has.
        available: Vec<String>,
    },
    /// Parts of a decomposed checkpoint that are not there (another decomposition, or files
    /// lost).
    MissingParts {
        /// The checkpoint (without the part suffix).
        path: PathBuf,
        /// The parts the decomposition has.
        count: usize,
        /// The indices of the parts not found.
        missing: Vec<usize>,
        /// The part counts of the files that are there, if any.
        written_for: Vec<usize>,
    },
    /// Values that a format cannot hold (e.g. a name too long, a size beyond the format's
    /// 32-bit counts); nothing was written.
    Unwritable {
        /// The file.
        path: PathBuf,
        /// What cannot be written.
        what: String,
    },
    /// A field for the data could not be allocated (wraps [`FieldError`]; reports its code).
    Field(FieldError),
}

impl IoError {
    /// The error's stable code (see the catalogue in [`crate::error`]).
    pub fn code(&self) -> &'static str {
        match self {
            IoError::Os { .. } => "S0401",
            IoError::NotFormat { .. } => "S0402",
            IoError::Unsupported { .. } => "S0403",
            IoError::Malformed { .. } => "S0404",
            IoError::WrongType { .. } => "S0405",
            IoError::WrongShape { .. } => "S0406",
            IoError::Checksum { .. } => "S0407",
            IoError::Mismatch { .. } => "S0408",
            IoError::Missing { .. } => "S0409",
            IoError::Unwritable { .. } => "S0410",
            IoError::MissingParts { .. } => "S0411",
            IoError::Field(e) => e.code(),
        }
    }

    /// What went wrong, naming the file, what was expected and what was found.
    pub fn message(&self) -> String {
        let named = |name: &str| if name.is_empty() { String::new() } else { format!(" `{name}`") };
        match self {
            IoError::Os { path, op, message } => format!("{}: cannot {op}: {message}", path.display()),
            IoError::NotFormat { path, format, found } => {
                format!("{}: not a {format} file: it starts with {found}", path.display())
            }
            IoError::Unsupported { path, what, .. } => format!("{}: {what}", path.display()),
            IoError::Malformed { path, what } => format!("{}: damaged file: {what}", path.display()),
            IoError::WrongType { path, name, expected, found } => {
                format!("{}: the array{} holds {found}, but {expected} was asked for", path.display(), named(name))
            }
            IoError::WrongShape { path, name, expected, found } => format!(
                "{}: the array{} has shape {found:?}, but {expected:?} was expected",
                path.display(),
                named(name)
            ),
            IoError::Checksum { path, what, recorded, computed } => format!(
                "{}: the checksum of {what} is {computed:#018x}, but {recorded:#018x} was recorded: the bytes changed \
                 after they were written",
                path.display()
            ),
            IoError::Mismatch { path, what, expected, found } => {
                format!("{}: the checkpoint's {what} is {found}, but this run's is {expected}", path.display())
            }
            IoError::Missing { path, name, available } if path.as_os_str().is_empty() => {
                format!("no variable `{name}`; there are {available:?}")
            }
            IoError::Missing { path, name, available } => {
                format!("{}: no variable `{name}`; the file has {available:?}", path.display())
            }
            // Refused before a file was named (`Writer::field`, `Checkpoint::push`).
            IoError::Unwritable { path, what } if path.as_os_str().is_empty() => format!("cannot write {what}"),
            IoError::Unwritable { path, what } => format!("{}: cannot write {what}", path.display()),
            IoError::MissingParts { path, count, missing, written_for } => {
                let first = checkpoint::part_path(path, missing[0], *count);
                let written = match written_for.as_slice() {
                    [] => String::new(),
                    w => format!("; the files there are parts of a run of {w:?} subdomains"),
                };
                format!(
                    "{}: parts {missing:?} of the {count} of this run's decomposition are missing (no `{}`){written}",
                    path.display(),
                    first.display()
                )
            }
            IoError::Field(e) => e.message(),
        }
    }

    /// What to change.
    pub fn help(&self) -> String {
        match self {
            IoError::Os { .. } => "check that the path exists and is readable (or its folder writable)".into(),
            IoError::NotFormat { format, .. } => format!("pass a {format} file"),
            IoError::Unsupported { help, .. } => help.clone(),
            IoError::Malformed { .. } => {
                "write the file again; a file cut short by a full disk or an interrupted copy \
                                          looks like this"
                    .into()
            }
            IoError::WrongType { found, .. } => format!("read it into a field of {found}, or convert the file"),
            IoError::WrongShape { found, .. } => {
                format!("read it into a field whose interior is {found:?} (numpy axis order: [i, j, k])")
            }
            IoError::Checksum { .. } => "the file is corrupt: restart from another checkpoint".into(),
            IoError::Mismatch { what, .. } => format!(
                "restart with the settings the checkpoint was written with (its {what}), or from a checkpoint of this \
                 run"
            ),
            IoError::Missing { available, .. } => format!("ask for one of {available:?}"),
            IoError::Unwritable { .. } => "shorten the names or split the data into smaller files".into(),
            IoError::MissingParts { .. } => "restart with the decomposition the checkpoint was written with (the same \
                                             --domains and --grid), with every part file next to the others"
                .into(),
            IoError::Field(e) => e.help(),
        }
    }

    /// An [`IoError::Os`] for `path`.
    pub(crate) fn os(path: &Path, op: &'static str, e: std::io::Error) -> Self {
        IoError::Os { path: path.to_path_buf(), op, message: e.to_string() }
    }

    /// An [`IoError::Malformed`] for `path`.
    pub(crate) fn malformed(path: &Path, what: impl Into<String>) -> Self {
        IoError::Malformed { path: path.to_path_buf(), what: what.into() }
    }
}

impl From<FieldError> for IoError {
    fn from(e: FieldError) -> Self {
        IoError::Field(e)
    }
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]\nhelp: {}", self.message(), self.code(), self.help())
    }
}

impl std::error::Error for IoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            IoError::Field(e) => Some(e),
            _ => None,
        }
    }
}

/// A reader that turns a short read into [`IoError::Malformed`] and other failures into
/// [`IoError::Os`], naming the file.
pub(crate) struct Input<R> {
    pub inner: R,
    pub path: PathBuf,
    /// Bytes consumed so far.
    pub at: u64,
}

impl Input<std::io::BufReader<std::fs::File>> {
    /// Opens `path` for reading.
    pub fn open(path: &Path) -> Result<Self, IoError> {
        let file = std::fs::File::open(path).map_err(|e| IoError::os(path, "open", e))?;
        Ok(Input { inner: std::io::BufReader::with_capacity(1 << 20, file), path: path.to_path_buf(), at: 0 })
    }
}

impl<R: std::io::Read> Input<R> {
    /// Reads exactly `buf.len()` bytes; `what` names them in the error of a short file.
    pub fn exact(&mut self, buf: &mut [u8], what: &str) -> Result<(), IoError> {
        match self.inner.read_exact(buf) {
            Ok(()) => {
                self.at += buf.len() as u64;
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(IoError::malformed(
                &self.path,
                format!("the file ends at byte {} or before, inside {what} ({} bytes from there)", self.at, buf.len()),
            )),
            Err(e) => Err(IoError::os(&self.path, "read", e)),
        }
    }

    /// `n` bytes as a vector.
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<Vec<u8>, IoError> {
        let mut v = Vec::new();
        v.try_reserve_exact(n).map_err(|_| IoError::malformed(&self.path, format!("{what} announces {n} bytes")))?;
        v.resize(n, 0);
        self.exact(&mut v, what)?;
        Ok(v)
    }

    /// Whether the input is at its end.
    pub fn at_end(&mut self) -> Result<bool, IoError> {
        let mut one = [0u8; 1];
        match self.inner.read(&mut one) {
            Ok(0) => Ok(true),
            Ok(_) => Ok(false),
            Err(e) => Err(IoError::os(&self.path, "read", e)),
        }
    }
}

/// A buffered file writer that names the file in its errors. Data goes to `NAME.tmp` first and
/// is renamed to `NAME` by [`Output::finish`], so a reader never sees half a file.
pub(crate) struct Output {
    inner: std::io::BufWriter<std::fs::File>,
    path: PathBuf,
    tmp: PathBuf,
}

impl Output {
    /// Creates `path` (through a temporary name next to it).
    pub fn create(path: &Path) -> Result<Self, IoError> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let file = std::fs::File::create(&tmp).map_err(|e| IoError::os(&tmp, "create", e))?;
        Ok(Output { inner: std::io::BufWriter::with_capacity(1 << 20, file), path: path.to_path_buf(), tmp })
    }

    /// Writes all of `bytes`.
    pub fn put(&mut self, bytes: &[u8]) -> Result<(), IoError> {
        use std::io::Write;
        self.inner.write_all(bytes).map_err(|e| IoError::os(&self.path, "write", e))
    }

    /// Flushes, syncs and renames the file to its name.
    pub fn finish(self) -> Result<(), IoError> {
        let Output { inner, path, tmp } = self;
        let file = inner.into_inner().map_err(|e| IoError::os(&path, "write", e.into_error()))?;
        file.sync_all().map_err(|e| IoError::os(&path, "write", e))?;
        drop(file);
        std::fs::rename(&tmp, &path).map_err(|e| IoError::os(&path, "rename", e))
    }
}

/// Visits every row of an `n`-box along the fastest of `axes` (fastest first): calls `f` with
/// the coordinate of each row's first point, rows in the order of the other axes.
fn for_each_row<const D: usize>(n: [usize; D], axes: [usize; D], mut f: impl FnMut([usize; D])) {
    if n.contains(&0) {
        return;
    }
    let rows: usize = axes[1..].iter().map(|&a| n[a]).product();
    for r in 0..rows {
        let mut p = [0usize; D];
        let mut rest = r;
        for &a in &axes[1..] {
            p[a] = rest % n[a];
            rest /= n[a];
        }
        f(p);
    }
}

/// The storage offset of interior point `p` (0-based interior coordinates).
fn interior_offset<T: Element, const D: usize>(field: &Field<T, D>, p: [usize; D]) -> usize {
    let halo = field.shape().halo_widths();
    field.shape().offset(std::array::from_fn(|a| p[a] + halo[a]))
}

/// Writes the interior of `field` as an array whose axes lie in the file in order `file_axes`
/// (fastest first), big-endian if `big`. A row along the file's fastest axis that is also the
/// field's contiguous axis goes straight from the field's storage (no copy on a machine of the
/// file's byte order); other rows are gathered first.
pub(crate) fn write_interior<T: IoElement, const D: usize>(
    out: &mut Output,
    field: &Field<T, D>,
    file_axes: [usize; D],
    big: bool,
) -> Result<(), IoError> {
    let n = field.shape().interior();
    let (fast, strides) = (file_axes[0], field.shape().strides());
    let contiguous = field.shape().contiguous_axis() == fast;
    let data = field.as_slice();
    let mut row = Vec::with_capacity(n[fast]);
    let mut result = Ok(());
    for_each_row(n, file_axes, |p| {
        if result.is_err() {
            return;
        }
        let start = interior_offset(field, p);
        let values: &[T] = if contiguous {
            &data[start..start + n[fast]]
        } else {
            row.clear();
            row.extend((0..n[fast]).map(|x| data[start + x * strides[fast]]));
            &row
        };
        result = out.put(&to_bytes(values, big));
    });
    result
}

/// Reads an array whose axes lie in the file in order `file_axes` (fastest first) into the
/// interior of `field` (of the array's shape), big-endian if `big`: rows along the field's
/// contiguous axis straight into its storage, others through a row buffer.
pub(crate) fn read_interior<T: IoElement, R: std::io::Read, const D: usize>(
    input: &mut Input<R>,
    field: &mut Field<T, D>,
    file_axes: [usize; D],
    big: bool,
    what: &str,
) -> Result<(), IoError> {
    let n = field.shape().interior();
    let (fast, strides) = (file_axes[0], field.shape().strides());
    let contiguous = field.shape().contiguous_axis() == fast;
    let mut row = vec![T::default(); if contiguous { 0 } else { n[fast] }];
    let mut starts = Vec::new();
    for_each_row(n, file_axes, |p| starts.push(interior_offset(field, p)));
    let data = field.as_mut_slice();
    for start in starts {
        if contiguous {
            read_values(input, &mut data[start..start + n[fast]], big, what)?;
        } else {
            read_values(input, &mut row, big, what)?;
            for (x, v) in row.iter().enumerate() {
                data[start + x * strides[fast]] = *v;
            }
        }
    }
    Ok(())
}

/// Random fields and scratch folders for the format modules' tests.
#[cfg(test)]
pub(crate) mod test_util {
    use crate::field::{Element, Field, Shape};
    use std::path::PathBuf;

    /// xorshift64*: reproducible random numbers without a dependency.
    pub struct Rng(pub u64);

    impl Rng {
        pub fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        pub fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        /// A value in [-1, 1) with random low bits.
        pub fn f64(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        }
    }

    /// A field of random values, halo included.
    pub fn random_field<T: Element, const D: usize>(
        shape: Shape<D>,
        rng: &mut Rng,
        make: impl Fn(&mut Rng) -> T,
    ) -> Field<T, D> {
        Field::from_fn(shape, |_| make(rng))
    }

    /// A fresh scratch folder.
    pub fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("stencil-io-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
