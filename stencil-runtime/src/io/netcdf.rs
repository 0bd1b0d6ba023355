//! NetCDF *classic* files (CDF-1, and CDF-2 with 64-bit offsets) in pure Rust: no C library.
//! Cargo feature `netcdf`.
//!
//! [`Writer`] writes fields of one grid with their coordinates as a CF-1.8 file: the global
//! attribute `Conventions = "CF-1.8"`, one dimension and one coordinate variable per axis
//! (`double x(x)` with `units`, `axis`, `long_name`), and per field a variable with `units` and
//! `long_name`. Element types: `f32` (`float`), `f64` (`double`), `i32` (`int`); the classic
//! formats have no unsigned 32-bit type, so `u32` fields are refused.
//!
//! Axes: a variable's dimensions are written slowest first, `(z, y, x)` for a 3D field, as CF and
//! ncdump expect: `v[k, j, i]` in numpy/scipy is `field.get([i, j, k])`, the reverse of the
//! `.npy` convention (see the [module docs](super#axis-convention)); [`Dataset::read`] turns a
//! variable back into a field the same way (its last dimension is the field's axis 0).
//!
//! [`Dataset`] reads the header of any classic file (what ncgen, ncdump's input, scipy's
//! `netcdf_file` and netCDF-C write in the classic and 64-bit-offset formats: dimensions,
//! attributes of every type, fixed-size and record variables) and a variable of type `float`,
//! `double` or `int` into a field. NetCDF-4 (HDF5) and CDF-5 files are refused with an error
//! that says how to convert them (`nccopy -k classic`).
//!
//! The classic formats store big-endian values, so neither writing nor reading is zero-copy on
//! a little-endian machine: each row is byte-swapped through a row buffer (one row at a time;
//! no copy of the whole field).
//!
//! ```
//! use stencil_runtime::io::netcdf::{Axis, Dataset, Writer};
//! use stencil_runtime::prelude::*;
//!
//! let path = std::env::temp_dir().join(format!("stencil-nc-doc-{}.nc", std::process::id()));
//! let t = Field2::from_fn(Shape2::new([4, 3]).halo(1), |[i, j]| (10 * i + j) as f64);
//! let mut nc = Writer::new(vec![
//!     Axis::regular("x", 4, 0.5, 1.0, "m").axis("X"),
//!     Axis::regular("y", 3, 0.5, 1.0, "m").axis("Y"),
//! ]);
//! nc.attribute("title", "a test");
//! nc.field("t", &t, "K", "temperature")?;
//! nc.write(&path)?;                                      // ncdump: double t(y, x)
//!
//! let ds = Dataset::open(&path)?;
//! assert_eq!(ds.text_attribute("Conventions"), Some("CF-1.8"));
//! let back: Field2<f64> = ds.read("t", 1)?;
//! assert_eq!(back.get([3, 2]), Some(32.0));
//! assert_eq!(ds.coordinate("x")?, vec![0.5, 1.5, 2.5, 3.5]);
//! # std::fs::remove_file(&path).unwrap();
//! # Ok::<(), stencil_runtime::io::IoError>(())
//! ```

use super::{read_interior, write_interior, Input, IoElement, IoError, Output};
use crate::field::{Field, Shape};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

const NC_DIMENSION: u32 = 10;
const NC_VARIABLE: u32 = 11;
const NC_ATTRIBUTE: u32 = 12;
const NC_BYTE: u32 = 1;
const NC_CHAR: u32 = 2;
const NC_SHORT: u32 = 3;
const NC_INT: u32 = 4;
const NC_FLOAT: u32 = 5;
const NC_DOUBLE: u32 = 6;

/// The classic format variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// CDF-1 when every offset fits in 31 bits, else CDF-2.
    #[default]
    Auto,
    /// CDF-1 (`CDF\x01`): files up to about 2 GiB.
    Classic,
    /// CDF-2 (`CDF\x02`, "64-bit offset"): large files, each variable below 4 GiB.
    Offset64,
}

/// An attribute's values.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// `char` text.
    Text(String),
    /// `byte` values.
    Bytes(Vec<i8>),
    /// `short` values.
    Shorts(Vec<i16>),
    /// `int` values.
    Ints(Vec<i32>),
    /// `float` values.
    Floats(Vec<f32>),
    /// `double` values.
    Doubles(Vec<f64>),
}

impl From<&str> for Attr {
    fn from(s: &str) -> Self {
        Attr::Text(s.to_string())
    }
}
impl From<String> for Attr {
    fn from(s: String) -> Self {
        Attr::Text(s)
    }
}
impl From<f64> for Attr {
    fn from(v: f64) -> Self {
        Attr::Doubles(vec![v])
    }
}
impl From<i32> for Attr {
    fn from(v: i32) -> Self {
        Attr::Ints(vec![v])
    }
}

impl Attr {
    fn nc_type(&self) -> u32 {
        match self {
            Attr::Text(_) => NC_CHAR,
            Attr::Bytes(_) => NC_BYTE,
            Attr::Shorts(_) => NC_SHORT,
            Attr::Ints(_) => NC_INT,
            Attr::Floats(_) => NC_FLOAT,
            Attr::Doubles(_) => NC_DOUBLE,
        }
    }

    /// The values as big-endian bytes (not padded) and their count.
    fn encode(&self) -> (Vec<u8>, usize) {
        let mut b = Vec::new();
        let n = match self {
            Attr::Text(s) => {
                b.extend_from_slice(s.as_bytes());
                s.len()
            }
            Attr::Bytes(v) => {
                b.extend(v.iter().map(|&x| x as u8));
                v.len()
            }
            Attr::Shorts(v) => {
                v.iter().for_each(|x| b.extend_from_slice(&x.to_be_bytes()));
                v.len()
            }
            Attr::Ints(v) => {
                v.iter().for_each(|x| b.extend_from_slice(&x.to_be_bytes()));
                v.len()
            }
            Attr::Floats(v) => {
                v.iter().for_each(|x| b.extend_from_slice(&x.to_be_bytes()));
                v.len()
            }
            Attr::Doubles(v) => {
                v.iter().for_each(|x| b.extend_from_slice(&x.to_be_bytes()));
                v.len()
            }
        };
        (b, n)
    }
}

/// Bytes of one value of a NetCDF type.
fn type_size(t: u32) -> usize {
    match t {
        NC_BYTE | NC_CHAR => 1,
        NC_SHORT => 2,
        NC_INT | NC_FLOAT => 4,
        _ => 8,
    }
}

/// The CDL name of a NetCDF type.
fn type_name(t: u32) -> String {
    match t {
        NC_BYTE => "byte".into(),
        NC_CHAR => "char".into(),
        NC_SHORT => "short".into(),
        NC_INT => "int".into(),
        NC_FLOAT => "float".into(),
        NC_DOUBLE => "double".into(),
        t => format!("type {t}"),
    }
}

/// The CDL type of element type `T`.
fn cdl_of<T: IoElement>() -> String {
    T::NC_TYPE.map_or_else(|| "unsigned int (not in the classic formats)".into(), type_name)
}

/// One axis of the grid: a dimension and its coordinate variable.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The dimension's (and coordinate variable's) name, e.g. `x`.
    pub name: String,
    /// The coordinate of each point.
    pub values: Vec<f64>,
    /// The coordinate's `units` (e.g. `m`).
    pub units: String,
    /// CF's `axis` attribute (`X`, `Y`, `Z`, `T`), if any.
    pub axis: Option<String>,
    /// The `long_name`, if any.
    pub long_name: Option<String>,
}

impl Axis {
    /// `n` points at `start`, `start + step`, ... in `units`.
    pub fn regular(name: &str, n: usize, start: f64, step: f64, units: &str) -> Self {
        Axis::with_values(name, (0..n).map(|i| start + i as f64 * step).collect(), units)
    }

    /// An axis of the given coordinates.
    pub fn with_values(name: &str, values: Vec<f64>, units: &str) -> Self {
        Axis { name: name.into(), values, units: units.into(), axis: None, long_name: None }
    }

    /// The same axis with CF's `axis` attribute (`X`, `Y`, `Z`).
    pub fn axis(mut self, axis: &str) -> Self {
        self.axis = Some(axis.into());
        self
    }

    /// The same axis with a `long_name`.
    pub fn long_name(mut self, long_name: &str) -> Self {
        self.long_name = Some(long_name.into());
        self
    }
}

/// A variable's description in the header: name, dimensions (indices into the axes, slowest
/// first), type and attributes.
type Description = (String, Vec<usize>, u32, Vec<(String, Attr)>);

/// What writes a field's values into the file.
type WriteValues<'a> = Box<dyn Fn(&mut Output) -> Result<(), IoError> + 'a>;

/// A field to write: its description and what writes its values.
struct VarOut<'a> {
    description: Description,
    write: WriteValues<'a>,
}

/// A CF-1.8 NetCDF classic file being put together: axes, global attributes and fields that
/// share the axes (borrowed until [`Writer::write`]).
pub struct Writer<'a> {
    axes: Vec<Axis>,
    attributes: Vec<(String, Attr)>,
    fields: Vec<VarOut<'a>>,
    format: Format,
}

impl<'a> Writer<'a> {
    /// A file on the grid of `axes`, given in the fields' axis order (`axes[0]` is the fields'
    /// axis 0, `x`), with the global attribute `Conventions = "CF-1.8"`.
    pub fn new(axes: Vec<Axis>) -> Self {
        Writer {
            axes,
            attributes: vec![("Conventions".into(), "CF-1.8".into())],
            fields: Vec::new(),
            format: Format::Auto,
        }
    }

    /// The same writer with another format variant.
    pub fn format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    /// Sets a global attribute (replacing one of the same name).
    pub fn attribute(&mut self, name: &str, value: impl Into<Attr>) {
        self.attributes.retain(|(n, _)| n != name);
        self.attributes.push((name.into(), value.into()));
    }

    /// Adds field `name` (its interior) with its `units` and `long_name`. Its interior must be
    /// the axes' lengths; `u32` fields are refused (module docs).
    pub fn field<T: IoElement, const D: usize>(
        &mut self,
        name: &str,
        field: &'a Field<T, D>,
        units: &str,
        long_name: &str,
    ) -> Result<&mut Self, IoError> {
        let unwritable = |what: String| IoError::Unwritable { path: PathBuf::new(), what };
        let nc_type = T::NC_TYPE.ok_or_else(|| {
            unwritable(format!(
                "field `{name}` of u32: the classic formats have no unsigned 32-bit type (convert it to i32 or f64)"
            ))
        })?;
        let lengths: Vec<usize> = self.axes.iter().map(|a| a.values.len()).collect();
        if lengths != field.shape().interior() {
            return Err(unwritable(format!(
                "field `{name}` of interior {:?} on axes of lengths {lengths:?}: give every field the axes' lengths",
                field.shape().interior()
            )));
        }
        if self.fields.iter().any(|f| f.description.0 == name) || self.axes.iter().any(|a| a.name == name) {
            return Err(unwritable(format!("variable `{name}` twice")));
        }
        let attributes = vec![("units".into(), units.into()), ("long_name".into(), long_name.into())];
        let axes: [usize; D] = std::array::from_fn(|a| a);
        self.fields.push(VarOut {
            description: (name.into(), (0..D).rev().collect(), nc_type, attributes),
            write: Box::new(move |out: &mut Output| write_interior(out, field, axes, true)),
        });
        Ok(self)
    }

    /// Adds attribute `name` to variable `var` (a field or an axis added before).
    pub fn variable_attribute(&mut self, var: &str, name: &str, value: impl Into<Attr>) -> Result<(), IoError> {
        let Some(f) = self.fields.iter_mut().find(|f| f.description.0 == var) else {
            return Err(IoError::Missing {
                path: PathBuf::new(),
                name: var.into(),
                available: self.fields.iter().map(|f| f.description.0.clone()).collect(),
            });
        };
        f.description.3.retain(|(n, _)| n != name);
        f.description.3.push((name.into(), value.into()));
        Ok(())
    }

    /// Writes the file (under a temporary name, renamed when complete).
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), IoError> {
        let path = path.as_ref();
        let _span =
            tracing::debug_span!(target: "stencil::io", "netcdf_write", path = %path.display(), fields = self.fields.len())
                .entered();
        let unwritable = |what: String| IoError::Unwritable { path: path.to_path_buf(), what };
        // The coordinate variables, then the fields.
        let coordinates: Vec<Description> = self
            .axes
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let mut attributes = vec![("units".to_string(), Attr::from(a.units.as_str()))];
                if let Some(l) = &a.long_name {
                    attributes.push(("long_name".into(), l.as_str().into()));
                }
                if let Some(x) = &a.axis {
                    attributes.push(("axis".into(), x.as_str().into()));
                }
                (a.name.clone(), vec![i], NC_DOUBLE, attributes)
            })
            .collect();
        let vars: Vec<&Description> = coordinates.iter().chain(self.fields.iter().map(|f| &f.description)).collect();
        let sizes: Vec<u64> = vars
            .iter()
            .map(|(_, dims, t, _)| {
                dims.iter().map(|&d| self.axes[d].values.len() as u64).product::<u64>() * type_size(*t) as u64
            })
            .collect();
        if let Some(i) = sizes.iter().position(|&s| s > u32::MAX as u64 - 4) {
            return Err(unwritable(format!(
                "variable `{}` of {} bytes: the classic formats hold variables below 4 GiB",
                vars[i].0, sizes[i]
            )));
        }
        if let Some((bad, ..)) = vars.iter().find(|(n, ..)| n.is_empty() || n.contains('/') || n.len() > 256) {
            return Err(unwritable(format!("variable name {bad:?}: names are 1 to 256 characters without '/'")));
        }
        let padded: Vec<u64> = sizes.iter().map(|s| s.div_ceil(4) * 4).collect();
        let data_bytes: u64 = padded.iter().sum();
        let classic_header = self.encode_header(&vars, &padded, false, 0).len() as u64;
        let offset64 = match self.format {
            Format::Classic => false,
            Format::Offset64 => true,
            Format::Auto => classic_header + data_bytes > i32::MAX as u64,
        };
        let header_len = self.encode_header(&vars, &padded, offset64, 0).len() as u64;
        let last_begin = header_len + data_bytes - padded.last().copied().unwrap_or(0);
        if !offset64 && last_begin > i32::MAX as u64 {
            return Err(unwritable(format!(
                "{} bytes in the CDF-1 format, whose offsets stop at 2 GiB: use Format::Offset64",
                header_len + data_bytes
            )));
        }
        let header = self.encode_header(&vars, &padded, offset64, header_len);
        debug_assert_eq!(header.len() as u64, header_len);
        let mut out = Output::create(path)?;
        out.put(&header)?;
        let pad = |out: &mut Output, size: u64| out.put(&[0u8; 3][..(size.div_ceil(4) * 4 - size) as usize]);
        for (a, size) in self.axes.iter().zip(&sizes) {
            out.put(&a.values.iter().flat_map(|x| x.to_be_bytes()).collect::<Vec<u8>>())?;
            pad(&mut out, *size)?;
        }
        for (f, size) in self.fields.iter().zip(&sizes[self.axes.len()..]) {
            (f.write)(&mut out)?;
            pad(&mut out, *size)?;
        }
        out.finish()
    }

    /// The header: `begin` is the first data byte (0 while sizing it).
    fn encode_header(&self, vars: &[&Description], padded: &[u64], offset64: bool, begin: u64) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(if offset64 { b"CDF\x02" } else { b"CDF\x01" });
        put_u32(&mut h, 0); // numrecs: no record variables
        put_list(&mut h, NC_DIMENSION, self.axes.len());
        for a in &self.axes {
            put_name(&mut h, &a.name);
            put_u32(&mut h, a.values.len() as u32);
        }
        put_attributes(&mut h, &self.attributes);
        put_list(&mut h, NC_VARIABLE, vars.len());
        let mut at = begin;
        for ((name, dims, nc_type, attributes), size) in vars.iter().zip(padded) {
            put_name(&mut h, name);
            put_u32(&mut h, dims.len() as u32);
            dims.iter().for_each(|&d| put_u32(&mut h, d as u32));
            put_attributes(&mut h, attributes);
            put_u32(&mut h, *nc_type);
            put_u32(&mut h, *size as u32);
            if offset64 {
                h.extend_from_slice(&at.to_be_bytes());
            } else {
                put_u32(&mut h, at as u32);
            }
            at += size;
        }
        h
    }
}

fn put_u32(h: &mut Vec<u8>, v: u32) {
    h.extend_from_slice(&v.to_be_bytes());
}

/// A list's tag and length, or ABSENT (two zero words) when empty.
fn put_list(h: &mut Vec<u8>, tag: u32, n: usize) {
    put_u32(h, if n == 0 { 0 } else { tag });
    put_u32(h, n as u32);
}

/// A name: its length and bytes, padded to 4 bytes.
fn put_name(h: &mut Vec<u8>, name: &str) {
    put_u32(h, name.len() as u32);
    h.extend_from_slice(name.as_bytes());
    h.resize(h.len().div_ceil(4) * 4, 0);
}

fn put_attributes(h: &mut Vec<u8>, attributes: &[(String, Attr)]) {
    put_list(h, NC_ATTRIBUTE, attributes.len());
    for (name, value) in attributes {
        put_name(h, name);
        put_u32(h, value.nc_type());
        let (bytes, n) = value.encode();
        put_u32(h, n as u32);
        h.extend_from_slice(&bytes);
        h.resize(h.len().div_ceil(4) * 4, 0);
    }
}

/// A dimension of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dimension {
    /// Its name.
    pub name: String,
    /// Its length (for the record dimension: the number of records).
    pub len: usize,
    /// Whether it is the record (unlimited) dimension.
    pub record: bool,
}

/// A variable of a file.
#[derive(Clone, Debug, PartialEq)]
pub struct Variable {
    /// Its name.
    pub name: String,
    /// Its dimensions (indices into [`Dataset::dimensions`]), slowest first.
    pub dims: Vec<usize>,
    /// Its attributes.
    pub attributes: Vec<(String, Attr)>,
    nc_type: u32,
    begin: u64,
}

impl Variable {
    /// Its type's CDL name (`float`, `double`, `int`, ...).
    pub fn type_name(&self) -> String {
        type_name(self.nc_type)
    }

    /// A text attribute's value.
    pub fn text_attribute(&self, name: &str) -> Option<&str> {
        text_of(&self.attributes, name)
    }
}

fn text_of<'a>(attributes: &'a [(String, Attr)], name: &str) -> Option<&'a str> {
    match attributes.iter().find(|(n, _)| n == name) {
        Some((_, Attr::Text(t))) => Some(t.as_str()),
        _ => None,
    }
}

/// An open NetCDF classic file: its header (dimensions, attributes, variables); variables are
/// read on demand.
#[derive(Clone, Debug)]
pub struct Dataset {
    path: PathBuf,
    /// 1 (CDF-1) or 2 (CDF-2).
    pub version: u8,
    /// The dimensions.
    pub dimensions: Vec<Dimension>,
    /// The global attributes.
    pub attributes: Vec<(String, Attr)>,
    /// The variables.
    pub variables: Vec<Variable>,
    numrecs: usize,
    /// Bytes of one record (every record variable's slab).
    record_size: u64,
    /// Bytes of the file.
    file_len: u64,
}

impl Dataset {
    /// Opens `path` and reads its header.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, IoError> {
        let path = path.as_ref();
        let mut input = Input::open(path)?;
        let mut magic = [0u8; 4];
        input.exact(&mut magic, "the magic number").map_err(|e| match e {
            IoError::Malformed { path, .. } => {
                IoError::NotFormat { path, format: "NetCDF classic", found: "fewer than 4 bytes".into() }
            }
            e => e,
        })?;
        let version = match magic {
            [b'C', b'D', b'F', v @ (1 | 2)] => v,
            [b'C', b'D', b'F', 5] => {
                return Err(IoError::Unsupported {
                    path: path.to_path_buf(),
                    what: "a CDF-5 (64-bit data) file; this reader takes CDF-1 and CDF-2".into(),
                    help: "convert it: nccopy -k '64-bit offset' in.nc out.nc".into(),
                })
            }
            [0x89, b'H', b'D', b'F'] => {
                return Err(IoError::Unsupported {
                    path: path.to_path_buf(),
                    what: "a NetCDF-4 (HDF5) file; this reader takes the classic formats".into(),
                    help: "convert it: nccopy -k classic in.nc out.nc (or -k '64-bit offset')".into(),
                })
            }
            _ => {
                return Err(IoError::NotFormat {
                    path: path.to_path_buf(),
                    format: "NetCDF classic",
                    found: format!("{:?}", String::from_utf8_lossy(&magic)),
                })
            }
        };
        let mut r = HeaderReader { input: &mut input, offset64: version == 2 };
        let numrecs = r.u32("the number of records")?;
        let numrecs = if numrecs == u32::MAX { 0 } else { numrecs as usize };
        let mut dimensions = Vec::new();
        for _ in 0..r.list(NC_DIMENSION, "the dimension list")? {
            let name = r.name()?;
            let len = r.u32("a dimension's length")? as usize;
            dimensions.push(Dimension { name, len: if len == 0 { numrecs } else { len }, record: len == 0 });
        }
        let attributes = r.attributes()?;
        let mut variables = Vec::new();
        let mut record_sizes = Vec::new();
        for _ in 0..r.list(NC_VARIABLE, "the variable list")? {
            let name = r.name()?;
            let mut dims = Vec::new();
            for _ in 0..r.u32("a variable's rank")? {
                let d = r.u32("a dimension id")? as usize;
                if d >= dimensions.len() {
                    return Err(IoError::malformed(path, format!("variable `{name}` has dimension id {d}")));
                }
                dims.push(d);
            }
            let attributes = r.attributes()?;
            let nc_type = r.u32("a variable's type")?;
            if !(NC_BYTE..=NC_DOUBLE).contains(&nc_type) {
                return Err(IoError::malformed(path, format!("variable `{name}` has type {nc_type}")));
            }
            let vsize = r.u32("a variable's size")? as u64;
            let begin = if r.offset64 { r.u64("a variable's offset")? } else { r.u32("a variable's offset")? as u64 };
            if dims.first().is_some_and(|&d| dimensions[d].record) {
                record_sizes.push(vsize);
            }
            variables.push(Variable { name, dims, attributes, nc_type, begin });
        }
        // One record variable: its records are not padded; several: each slab is.
        let record_size = match record_sizes.as_slice() {
            [_] => {
                let v = variables.iter().find(|v| v.dims.first().is_some_and(|&d| dimensions[d].record)).expect("one");
                v.dims[1..].iter().map(|&d| dimensions[d].len as u64).product::<u64>() * type_size(v.nc_type) as u64
            }
            sizes => sizes.iter().sum(),
        };
        let file_len = std::fs::metadata(path).map_err(|e| IoError::os(path, "read", e))?.len();
        Ok(Dataset {
            path: path.to_path_buf(),
            version,
            dimensions,
            attributes,
            variables,
            numrecs,
            record_size,
            file_len,
        })
    }

    /// A global text attribute's value.
    pub fn text_attribute(&self, name: &str) -> Option<&str> {
        text_of(&self.attributes, name)
    }

    /// The variable `name`.
    pub fn variable(&self, name: &str) -> Result<&Variable, IoError> {
        self.variables.iter().find(|v| v.name == name).ok_or_else(|| IoError::Missing {
            path: self.path.clone(),
            name: name.into(),
            available: self.variables.iter().map(|v| v.name.clone()).collect(),
        })
    }

    /// The shape of variable `name`, slowest dimension first (as ncdump and numpy show it).
    pub fn shape(&self, name: &str) -> Result<Vec<usize>, IoError> {
        Ok(self.variable(name)?.dims.iter().map(|&d| self.dimensions[d].len).collect())
    }

    /// The values of the coordinate variable of dimension `name` (any numeric type) as `f64`.
    pub fn coordinate(&self, name: &str) -> Result<Vec<f64>, IoError> {
        let v = self.variable(name)?;
        if v.dims.len() != 1 || v.nc_type == NC_CHAR {
            return Err(IoError::Unsupported {
                path: self.path.clone(),
                what: format!(
                    "`{name}` is a {} variable of {} dimensions, not a coordinate",
                    v.type_name(),
                    v.dims.len()
                ),
                help: "ask for a one-dimensional numeric variable".into(),
            });
        }
        let size = type_size(v.nc_type);
        let bytes = self.data(v)?;
        Ok(bytes
            .chunks_exact(size)
            .map(|b| match v.nc_type {
                NC_BYTE => b[0] as i8 as f64,
                NC_SHORT => i16::from_be_bytes([b[0], b[1]]) as f64,
                NC_INT => i32::from_be_bytes(b.try_into().expect("4")) as f64,
                NC_FLOAT => f32::from_be_bytes(b.try_into().expect("4")) as f64,
                _ => f64::from_be_bytes(b.try_into().expect("8")),
            })
            .collect())
    }

    /// Variable `name` as a field with halo `halo` (zero), the default order and alignment; its
    /// last dimension is the field's axis 0 (module docs).
    pub fn read<T: IoElement, const D: usize>(&self, name: &str, halo: usize) -> Result<Field<T, D>, IoError> {
        self.read_like(name, Shape::new([0; D]).halo(halo))
    }

    /// Variable `name` as a field of `like`'s halo, order and alignment (its interior is the
    /// variable's shape, reversed).
    pub fn read_like<T: IoElement, const D: usize>(&self, name: &str, like: Shape<D>) -> Result<Field<T, D>, IoError> {
        let n = self.field_extent::<T, D>(name)?;
        self.check_extent(self.variable(name)?)?;
        let mut field = Field::try_zeros(like.with_interior(n))?;
        self.fill(name, &mut field)?;
        Ok(field)
    }

    /// Reads variable `name` into the interior of `field`, whose interior must be the
    /// variable's shape reversed; the halo is left as it is.
    pub fn read_into<T: IoElement, const D: usize>(&self, name: &str, field: &mut Field<T, D>) -> Result<(), IoError> {
        let n = self.field_extent::<T, D>(name)?;
        if n != field.shape().interior() {
            let mut expected = field.shape().interior().to_vec();
            expected.reverse();
            return Err(IoError::WrongShape {
                path: self.path.clone(),
                name: name.into(),
                expected,
                found: self.shape(name)?,
            });
        }
        self.check_extent(self.variable(name)?)?;
        self.fill(name, field)
    }

    /// Refuses a variable whose data would lie (partly) beyond the end of the file.
    fn check_extent(&self, v: &Variable) -> Result<(), IoError> {
        let size = type_size(v.nc_type) as u64;
        let product = |dims: &[usize]| dims.iter().try_fold(size, |n, &d| n.checked_mul(self.dimensions[d].len as u64));
        let end = if self.is_record(v) {
            let last = (self.numrecs as u64).checked_sub(1);
            match last {
                None => Some(v.begin),
                Some(last) => last
                    .checked_mul(self.record_size)
                    .and_then(|o| o.checked_add(v.begin))
                    .and_then(|o| o.checked_add(product(&v.dims[1..])?)),
            }
        } else {
            product(&v.dims).and_then(|n| n.checked_add(v.begin))
        };
        match end {
            Some(end) if end <= self.file_len => Ok(()),
            _ => Err(IoError::malformed(
                &self.path,
                format!("variable `{}` lies beyond the end of the file ({} bytes)", v.name, self.file_len),
            )),
        }
    }

    /// The interior a field of variable `name` has, after checking its type and rank.
    fn field_extent<T: IoElement, const D: usize>(&self, name: &str) -> Result<[usize; D], IoError> {
        let v = self.variable(name)?;
        if Some(v.nc_type) != T::NC_TYPE {
            return Err(IoError::WrongType {
                path: self.path.clone(),
                name: name.into(),
                expected: format!("{} ({})", T::NAME, cdl_of::<T>()),
                found: v.type_name(),
            });
        }
        let mut shape = self.shape(name)?;
        if shape.len() != D {
            return Err(IoError::Unsupported {
                path: self.path.clone(),
                what: format!(
                    "variable `{name}` has {} dimensions (shape {shape:?}), but a {D}D field was asked for",
                    shape.len()
                ),
                help: format!("read it into a field of {} dimensions", shape.len()),
            });
        }
        shape.reverse();
        Ok(shape.try_into().expect("D dimensions"))
    }

    /// Reads the variable's values into `field`'s interior (of the right extent).
    fn fill<T: IoElement, const D: usize>(&self, name: &str, field: &mut Field<T, D>) -> Result<(), IoError> {
        let v = self.variable(name)?;
        let _span =
            tracing::debug_span!(target: "stencil::io", "netcdf_read", path = %self.path.display(), variable = name)
                .entered();
        let axes: [usize; D] = std::array::from_fn(|a| a);
        let what = format!("variable `{name}`");
        if self.is_record(v) {
            let bytes = self.data(v)?;
            let mut input = Input { inner: std::io::Cursor::new(bytes), path: self.path.clone(), at: 0 };
            return read_interior(&mut input, field, axes, true, &what);
        }
        let mut input = self.at(v.begin)?;
        read_interior(&mut input, field, axes, true, &what)
    }

    fn is_record(&self, v: &Variable) -> bool {
        v.dims.first().is_some_and(|&d| self.dimensions[d].record)
    }

    /// A reader at byte `offset` of the file.
    fn at(&self, offset: u64) -> Result<Input<std::io::BufReader<std::fs::File>>, IoError> {
        let mut file = std::fs::File::open(&self.path).map_err(|e| IoError::os(&self.path, "open", e))?;
        file.seek(SeekFrom::Start(offset)).map_err(|e| IoError::os(&self.path, "read", e))?;
        Ok(Input { inner: std::io::BufReader::with_capacity(1 << 20, file), path: self.path.clone(), at: offset })
    }

    /// The variable's values as big-endian bytes, records one after the other.
    fn data(&self, v: &Variable) -> Result<Vec<u8>, IoError> {
        self.check_extent(v)?;
        let what = format!("variable `{}`", v.name);
        let size = type_size(v.nc_type) as u64;
        if !self.is_record(v) {
            let n: u64 = v.dims.iter().map(|&d| self.dimensions[d].len as u64).product::<u64>() * size;
            return self.at(v.begin)?.bytes(n as usize, &what);
        }
        let slab: u64 = v.dims[1..].iter().map(|&d| self.dimensions[d].len as u64).product::<u64>() * size;
        let mut out = Vec::new();
        for r in 0..self.numrecs as u64 {
            let mut input = self.at(v.begin + r * self.record_size)?;
            out.extend(input.bytes(slab as usize, &what)?);
        }
        Ok(out)
    }
}

/// Reads the header's numbers, names and attribute lists.
struct HeaderReader<'r, R> {
    input: &'r mut Input<R>,
    offset64: bool,
}

impl<R: Read> HeaderReader<'_, R> {
    fn u32(&mut self, what: &str) -> Result<u32, IoError> {
        let mut b = [0u8; 4];
        self.input.exact(&mut b, what)?;
        Ok(u32::from_be_bytes(b))
    }

    fn u64(&mut self, what: &str) -> Result<u64, IoError> {
        let mut b = [0u8; 8];
        self.input.exact(&mut b, what)?;
        Ok(u64::from_be_bytes(b))
    }

    /// A list's length (0 when ABSENT), after checking its tag.
    fn list(&mut self, tag: u32, what: &str) -> Result<u32, IoError> {
        let t = self.u32(what)?;
        let n = self.u32(what)?;
        if t != tag && !(t == 0 && n == 0) {
            return Err(IoError::malformed(&self.input.path, format!("{what} has tag {t}, not {tag}")));
        }
        Ok(n)
    }

    /// `n` bytes padded to 4.
    fn padded(&mut self, n: usize, what: &str) -> Result<Vec<u8>, IoError> {
        let mut b = self.input.bytes(n.div_ceil(4) * 4, what)?;
        b.truncate(n);
        Ok(b)
    }

    fn name(&mut self) -> Result<String, IoError> {
        let n = self.u32("a name's length")? as usize;
        if n > 1 << 16 {
            return Err(IoError::malformed(&self.input.path, format!("a name of {n} bytes")));
        }
        let b = self.padded(n, "a name")?;
        String::from_utf8(b).map_err(|_| IoError::malformed(&self.input.path, "a name is not UTF-8"))
    }

    fn attributes(&mut self) -> Result<Vec<(String, Attr)>, IoError> {
        let mut out = Vec::new();
        for _ in 0..self.list(NC_ATTRIBUTE, "an attribute list")? {
            let name = self.name()?;
            let t = self.u32("an attribute's type")?;
            let n = self.u32("an attribute's length")? as usize;
            if !(NC_BYTE..=NC_DOUBLE).contains(&t) || n > 1 << 28 {
                return Err(IoError::malformed(
                    &self.input.path,
                    format!("attribute `{name}` of type {t} and {n} values"),
                ));
            }
            let b = self.padded(n * type_size(t), &format!("attribute `{name}`"))?;
            let value = match t {
                NC_CHAR => Attr::Text(String::from_utf8_lossy(&b).trim_end_matches('\0').to_string()),
                NC_BYTE => Attr::Bytes(b.iter().map(|&x| x as i8).collect()),
                NC_SHORT => Attr::Shorts(b.chunks_exact(2).map(|c| i16::from_be_bytes([c[0], c[1]])).collect()),
                NC_INT => Attr::Ints(b.chunks_exact(4).map(|c| i32::from_be_bytes(c.try_into().expect("4"))).collect()),
                NC_FLOAT => {
                    Attr::Floats(b.chunks_exact(4).map(|c| f32::from_be_bytes(c.try_into().expect("4"))).collect())
                }
                _ => Attr::Doubles(b.chunks_exact(8).map(|c| f64::from_be_bytes(c.try_into().expect("8"))).collect()),
            };
            out.push((name, value));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Order;
    use crate::io::test_util::{random_field, temp_dir, Rng};

    fn axes(n: &[usize]) -> Vec<Axis> {
        ["x", "y", "z"]
            .iter()
            .zip(n)
            .map(|(name, &n)| Axis::regular(name, n, 0.5, 2.0, "m").axis(&name.to_uppercase()))
            .collect()
    }

    #[test]
    fn several_random_fields_round_trip_in_both_formats() {
        let dir = temp_dir("nc-rt");
        let mut rng = Rng(42);
        for format in [Format::Classic, Format::Offset64, Format::Auto] {
            for order in [Order::Ijk, Order::Kij] {
                let n = [1 + rng.below(7), 1 + rng.below(6), 1 + rng.below(5)];
                let shape = Shape::new(n).halo(rng.below(3)).order(order);
                let t = random_field(shape, &mut rng, |r| r.f64());
                let p = random_field(shape, &mut rng, |r| r.f64() as f32);
                let m = random_field(shape, &mut rng, |r| r.next() as i32);
                let mut w = Writer::new(axes(&n)).format(format);
                w.attribute("title", "round trip");
                w.attribute("answer", 42);
                w.field("t", &t, "K", "temperature").unwrap().field("p", &p, "Pa", "pressure").unwrap();
                w.field("mask", &m, "1", "mask").unwrap();
                w.variable_attribute("t", "standard_name", "air_temperature").unwrap();
                let path = dir.join(format!("{format:?}-{order:?}.nc"));
                w.write(&path).unwrap();
                let ds = Dataset::open(&path).unwrap();
                assert_eq!(ds.version, if format == Format::Offset64 { 2 } else { 1 });
                assert_eq!(ds.text_attribute("Conventions"), Some("CF-1.8"));
                assert_eq!(ds.text_attribute("title"), Some("round trip"));
                assert_eq!(
                    ds.attributes.iter().find(|(k, _)| k == "answer").map(|(_, v)| v),
                    Some(&Attr::Ints(vec![42]))
                );
                assert_eq!(ds.shape("t").unwrap(), vec![n[2], n[1], n[0]]);
                assert_eq!(ds.coordinate("y").unwrap(), (0..n[1]).map(|i| 0.5 + 2.0 * i as f64).collect::<Vec<_>>());
                let y = ds.variable("y").unwrap();
                assert_eq!((y.text_attribute("units"), y.text_attribute("axis")), (Some("m"), Some("Y")));
                let tv = ds.variable("t").unwrap();
                assert_eq!(tv.text_attribute("units"), Some("K"));
                assert_eq!(tv.text_attribute("standard_name"), Some("air_temperature"));
                let t2: Field<f64, 3> = ds.read_like("t", Shape::new([0; 3]).halo(1).order(Order::Kij)).unwrap();
                assert_eq!(t2.to_array(), t.to_array());
                let p2: Field<f32, 3> = ds.read("p", 0).unwrap();
                assert_eq!(p2.to_array(), p.to_array());
                let mut m2 = Field::<i32, 3>::zeros(shape);
                ds.read_into("mask", &mut m2).unwrap();
                assert_eq!(m2.to_array(), m.to_array());
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_layout_is_cdl_order_big_endian() {
        // A 2D field t(y, x) = 10 i + j: the data after the header is x fastest, big-endian.
        let dir = temp_dir("nc-layout");
        let t = Field::<f32, 2>::from_fn(Shape::new([3, 2]), |[i, j]| (10 * i + j) as f32);
        let mut w = Writer::new(axes(&[3, 2]));
        w.field("t", &t, "1", "t").unwrap();
        let path = dir.join("t.nc");
        w.write(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let data: Vec<f32> =
            bytes[bytes.len() - 24..].chunks(4).map(|c| f32::from_be_bytes(c.try_into().unwrap())).collect();
        assert_eq!(data, [0.0, 10.0, 20.0, 1.0, 11.0, 21.0]);
        assert_eq!(&bytes[..4], b"CDF\x01");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refusals_say_what_to_do() {
        let dir = temp_dir("nc-errors");
        let u = Field::<u32, 1>::zeros(Shape::new([4]));
        let e = Writer::new(axes(&[4])).field("u", &u, "1", "u").err().unwrap();
        assert!(e.to_string().contains("no unsigned 32-bit type"), "{e}");
        let f = Field::<f64, 1>::zeros(Shape::new([5]));
        let e = Writer::new(axes(&[4])).field("f", &f, "1", "f").err().unwrap();
        assert!(e.to_string().contains("[5]") && e.to_string().contains("[4]"), "{e}");

        let g = Field::<f64, 2>::from_fn(Shape::new([4, 3]), |[i, j]| (i + j) as f64);
        let mut w = Writer::new(axes(&[4, 3]));
        w.field("g", &g, "1", "g").unwrap();
        let path = dir.join("g.nc");
        w.write(&path).unwrap();
        let ds = Dataset::open(&path).unwrap();
        let e = ds.read::<f32, 2>("g", 0).unwrap_err();
        assert_eq!(e.code(), "S0405");
        assert!(e.to_string().contains("double") && e.to_string().contains("f32 (float)"), "{e}");
        assert_eq!(ds.read::<f64, 2>("h", 0).unwrap_err().code(), "S0409");
        assert_eq!(ds.read::<f64, 3>("g", 0).unwrap_err().code(), "S0403");
        let mut wrong = Field::<f64, 2>::zeros(Shape::new([3, 4]));
        let e = ds.read_into("g", &mut wrong).unwrap_err();
        assert!(e.to_string().contains("[3, 4]") && e.to_string().contains("[4, 3]"), "{e}");

        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 8]).unwrap();
        let e = Dataset::open(&path).unwrap().read::<f64, 2>("g", 0).unwrap_err();
        assert_eq!(e.code(), "S0404", "{e}");
        std::fs::write(&path, b"\x89HDF\r\n\x1a\n and so on").unwrap();
        let e = Dataset::open(&path).unwrap_err();
        assert!(e.to_string().contains("NetCDF-4") && e.help().contains("nccopy"), "{e}");
        std::fs::write(&path, b"GRIB").unwrap();
        assert_eq!(Dataset::open(&path).unwrap_err().code(), "S0402");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(test)]
mod damaged {
    use super::*;
    use crate::io::test_util::{random_field, temp_dir, Rng};

    /// Damaged files (bytes flipped, cut short) give errors, never panics.
    #[test]
    fn damaged_files_are_errors_not_panics() {
        let dir = temp_dir("nc-damaged");
        let mut rng = Rng(77);
        let f = random_field(Shape::new([5, 4, 3]), &mut rng, |r| r.f64() as f32);
        let mut w = Writer::new(
            ["x", "y", "z"].iter().zip([5, 4, 3]).map(|(a, n)| Axis::regular(a, n, 0.0, 1.0, "m").axis("X")).collect(),
        );
        w.attribute("title", "damaged");
        w.field("f", &f, "1", "f").unwrap();
        let good_path = dir.join("good.nc");
        w.write(&good_path).unwrap();
        let good = std::fs::read(&good_path).unwrap();
        let path = dir.join("bad.nc");
        for i in 0..600 {
            let mut b = good.clone();
            if i % 3 == 0 {
                b.truncate(rng.below(good.len()));
            } else {
                for _ in 0..1 + rng.below(4) {
                    let at = rng.below(good.len().min(400));
                    b[at] = rng.next() as u8;
                }
            }
            std::fs::write(&path, &b).unwrap();
            if let Ok(ds) = Dataset::open(&path) {
                for v in ds.variables.clone() {
                    let _ = ds.read::<f32, 3>(&v.name, 1);
                    let _ = ds.coordinate(&v.name);
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
