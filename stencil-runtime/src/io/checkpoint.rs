//! Checkpoints: a model's whole state (every field, halo included, the step, the time and any
//! scalars the model carries between steps) in a small self-describing binary file, so that a
//! run can stop and resume bit for bit.
//!
//! # Format (version 2, all numbers little-endian)
//!
//! ```text
//! b"STENCKPT"  u32 version  u64 header length  header  u64 FNV-1a of the header
//! then each field's bytes, in the header's order
//! header: model (u32 length + UTF-8), u64 step, f64 time, u32 D, D x u64 global grid,
//!         u8 has part [u64 index, u64 count, D x u64 process grid, D x u64 offset, D x u64 extent],
//!         u32 scalars [name, f64 value]..., u32 fields [name, u8 type (1 f32, 2 f64, 3 i32, 4 u32),
//!         u32 axes A, A x u64 interior, A x u64 halo, u8 order (0 Ijk, 1 Kij), u64 alignment,
//!         u64 bytes, u64 FNV-1a of the bytes]...
//! ```
//!
//! Version 2 has the row layout of design record 0034 (rows packed to the alignment); a version
//! 1 file, whose rows were padded to the lead plus the row, is read too, each row moved to its
//! place as the field is restored.
//!
//! A field's bytes are its whole storage ([`Field::as_slice`]: halo and padding included), so a
//! restored field is the written one, bit for bit, and writing needs no copy of the field on a
//! little-endian machine. Reading checks the magic, the version, the header's checksum, every
//! field's length and checksum and that nothing follows the last field before it hands out any
//! field; [`Checkpoint::expect`] and [`Checkpoint::field`] then check the checkpoint against the
//! run (model, grid, field set, element types, shapes). Every difference is an [`IoError`] that
//! names it: a restart never loads part of a state.
//!
//! A decomposed run writes one file per subdomain ([`part_path`]: `NAME.part-3-of-8`), each with
//! its subdomain's box ([`Part`]); [`read_parts`] checks that every part is there and that all
//! agree (model, step, time, grid, process grid, boxes) before it returns the local ones.

use super::{fnv1a, tag_name, to_bytes, Input, IoElement, IoError, Output, FNV_START};
use crate::domain::Decomposition;
use crate::field::{Field, Order, Shape};
use std::borrow::Cow;
use std::ops::Range;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"STENCKPT";
/// The format version this module writes (it reads this one and version 1).
pub const VERSION: u32 = 2;

/// Where a decomposed run's checkpoint part lies in the decomposition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The subdomain's index.
    pub index: usize,
    /// The number of subdomains (of parts).
    pub count: usize,
    /// The process grid.
    pub grid: Vec<usize>,
    /// The global coordinate of the subdomain's first interior point.
    pub offset: Vec<usize>,
    /// The subdomain's interior extent.
    pub extent: Vec<usize>,
}

impl Part {
    /// Subdomain `index` of `d`.
    pub fn of<const D: usize>(d: &Decomposition<D>, index: usize) -> Self {
        let s = d.subdomain(index);
        Part { index, count: d.len(), grid: d.grid().to_vec(), offset: s.offset.to_vec(), extent: s.extent.to_vec() }
    }
}

/// One stored field: its description and bytes.
#[derive(Clone, Debug)]
struct Stored<'a> {
    name: String,
    tag: u8,
    interior: Vec<usize>,
    halo: Vec<usize>,
    order: Order,
    align: usize,
    checksum: u64,
    /// Bytes of data (the header's count; `bytes` is empty until a reader fills it).
    len: usize,
    /// Rows packed to the alignment (version 2); else rows of the lead plus the row, rounded up
    /// to the alignment (version 1).
    packed: bool,
    bytes: Cow<'a, [u8]>,
}

impl Stored<'_> {
    /// The shape it was pushed with, as a `D`-dimensional shape.
    fn shape<const D: usize>(&self) -> Result<Shape<D>, IoError> {
        let (interior, halo) =
            (<[usize; D]>::try_from(self.interior.as_slice()), <[usize; D]>::try_from(self.halo.as_slice()));
        match (interior, halo) {
            (Ok(interior), Ok(halo)) => {
                Ok(Shape::new(interior).halo_per_axis(halo).order(self.order).align(self.align))
            }
            _ => Err(IoError::Unwritable {
                path: PathBuf::new(),
                what: format!("field `{}` as {D}-dimensional", self.name),
            }),
        }
    }

    /// The shape, described as [`Shape::describe`] does.
    fn describe(&self) -> String {
        format!("interior {:?} halo {:?} {:?} align {}", self.interior, self.halo, self.order, self.align)
    }
}

/// A model's state at one step: what a checkpoint file holds. Build it with [`Checkpoint::new`],
/// [`Checkpoint::push`] (borrowing the fields: no copy) and [`Checkpoint::scalar`], write it with
/// [`Checkpoint::write`]; [`Checkpoint::read`] reads one back.
///
/// ```
/// use stencil_runtime::io::checkpoint::Checkpoint;
/// use stencil_runtime::prelude::*;
///
/// let path = std::env::temp_dir().join(format!("stencil-ckpt-doc-{}", std::process::id()));
/// let u = Field2::from_fn(Shape2::new([8, 6]).halo(1), |[i, j]| (i * j) as f64);
/// let mut c = Checkpoint::new("heat", 40, 0.25, &[8, 6]);
/// c.push("u", &u)?;
/// c.write(&path)?;
///
/// let back = Checkpoint::read(&path)?;
/// back.expect("heat", &[8, 6], &["u"])?;               // another model, grid or field set: Err
/// let v: Field2<f64> = back.field("u", u.shape())?;    // another type or shape: Err
/// assert_eq!((back.step, back.time), (40, 0.25));
/// assert_eq!(v.as_slice(), u.as_slice());
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), stencil_runtime::io::IoError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Checkpoint<'a> {
    /// The model's name.
    pub model: String,
    /// Steps taken.
    pub step: u64,
    /// The simulated time.
    pub time: f64,
    /// The global grid (interior points per axis).
    pub global: Vec<usize>,
    /// The subdomain, for a part of a decomposed run.
    pub part: Option<Part>,
    scalars: Vec<(String, f64)>,
    fields: Vec<Stored<'a>>,
    path: PathBuf,
}

impl<'a> Checkpoint<'a> {
    /// An empty checkpoint of `model` after `step` steps at time `time` on a grid of `global`
    /// points.
    pub fn new(model: &str, step: u64, time: f64, global: &[usize]) -> Self {
        Checkpoint {
            model: model.to_string(),
            step,
            time,
            global: global.to_vec(),
            part: None,
            scalars: Vec::new(),
            fields: Vec::new(),
            path: PathBuf::new(),
        }
    }

    /// The same checkpoint as part `part` of a decomposed run.
    pub fn with_part(mut self, part: Part) -> Self {
        self.part = Some(part);
        self
    }

    /// Adds a scalar the model carries from step to step (stored bit for bit).
    pub fn scalar(&mut self, name: &str, value: f64) {
        self.scalars.push((name.to_string(), value));
    }

    /// Adds field `name` (its whole storage, borrowed until the checkpoint is written); an
    /// error if a field of that name is there already.
    pub fn push<T: IoElement, const D: usize>(&mut self, name: &str, field: &'a Field<T, D>) -> Result<(), IoError> {
        if self.fields.iter().any(|f| f.name == name) {
            return Err(IoError::Unwritable { path: self.path.clone(), what: format!("field `{name}` twice") });
        }
        let shape = field.shape();
        let bytes = to_bytes(field.as_slice(), false);
        self.fields.push(Stored {
            name: name.to_string(),
            tag: T::TAG,
            interior: shape.interior().to_vec(),
            halo: shape.halo_widths().to_vec(),
            order: shape.element_order(),
            align: shape.alignment(),
            checksum: fnv1a(FNV_START, &bytes),
            len: bytes.len(),
            packed: true,
            bytes,
        });
        Ok(())
    }

    /// The first floating-point field holding values that are not finite (NaN or infinite), with
    /// how many it holds (halo included): what a run checks its state with before it writes it.
    pub fn non_finite(&self) -> Option<(&str, usize)> {
        self.fields.iter().find_map(|f| {
            let count = match f.tag {
                t if t == f32::TAG => f.bytes.chunks_exact(4).filter(|b| !f32::get(b, false).is_finite()).count(),
                t if t == f64::TAG => f.bytes.chunks_exact(8).filter(|b| !f64::get(b, false).is_finite()).count(),
                _ => 0,
            };
            (count > 0).then_some((f.name.as_str(), count))
        })
    }

    /// Writes the interior of every field as a `.npy` file, `dir/STEM-NAME.npy` (as
    /// [`npy::write`](super::npy::write) writes a field), e.g. snapshots of a run's state every N
    /// steps; returns the paths written.
    pub fn write_npy(&self, dir: impl AsRef<Path>, stem: &str) -> Result<Vec<PathBuf>, IoError> {
        let mut written = Vec::new();
        for f in &self.fields {
            let path = dir.as_ref().join(format!("{stem}-{}.npy", f.name));
            macro_rules! typed {
                ($t:ty) => {
                    match f.interior.len() {
                        1 => super::npy::write(&path, &self.field::<$t, 1>(&f.name, &f.shape()?)?)?,
                        2 => super::npy::write(&path, &self.field::<$t, 2>(&f.name, &f.shape()?)?)?,
                        3 => super::npy::write(&path, &self.field::<$t, 3>(&f.name, &f.shape()?)?)?,
                        d => return Err(IoError::Unwritable { path, what: format!("a {d}-dimensional field as .npy") }),
                    }
                };
            }
            match f.tag {
                t if t == f32::TAG => typed!(f32),
                t if t == f64::TAG => typed!(f64),
                t if t == i32::TAG => typed!(i32),
                _ => typed!(u32),
            }
            written.push(path);
        }
        Ok(written)
    }

    /// The names of the fields, in the order they were pushed.
    pub fn field_names(&self) -> Vec<&str> {
        self.fields.iter().map(|f| f.name.as_str()).collect()
    }

    /// The file this checkpoint was read from (empty for one built in memory).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the checkpoint to `path` (under a temporary name, renamed when complete).
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), IoError> {
        self.write_version(path.as_ref(), VERSION)
    }

    /// [`Checkpoint::write`] with the format version `version` in the file (the fields' bytes
    /// as they are: the tests write version-1 files with version-1 rows).
    fn write_version(&self, path: &Path, version: u32) -> Result<(), IoError> {
        let _span =
            tracing::debug_span!(target: "stencil::io", "checkpoint_write", path = %path.display(), step = self.step)
                .entered();
        let header = self.encode_header();
        let mut out = Output::create(path)?;
        out.put(MAGIC)?;
        out.put(&version.to_le_bytes())?;
        out.put(&(header.len() as u64).to_le_bytes())?;
        out.put(&header)?;
        out.put(&fnv1a(FNV_START, &header).to_le_bytes())?;
        for f in &self.fields {
            out.put(&f.bytes)?;
        }
        out.finish()
    }

    /// Reads the checkpoint at `path`, checking its magic, version, checksums and length.
    pub fn read(path: impl AsRef<Path>) -> Result<Checkpoint<'static>, IoError> {
        Self::read_impl(path.as_ref(), true)
    }

    /// Reads only the header of the checkpoint at `path` (checked as by [`Checkpoint::read`]);
    /// its fields have no data.
    pub fn read_header(path: impl AsRef<Path>) -> Result<Checkpoint<'static>, IoError> {
        Self::read_impl(path.as_ref(), false)
    }

    /// Checks that the checkpoint is of `model` on a `global` grid with exactly the fields
    /// `fields` (in any order); the error names what differs.
    pub fn expect(&self, model: &str, global: &[usize], fields: &[&str]) -> Result<(), IoError> {
        self.differs("model", &format!("{model:?}"), &format!("{:?}", self.model), self.model == model)?;
        self.differs("global grid", &format!("{global:?}"), &format!("{:?}", self.global), self.global == global)?;
        let mut want: Vec<&str> = fields.to_vec();
        let mut have = self.field_names();
        want.sort_unstable();
        have.sort_unstable();
        if want != have {
            let missing: Vec<_> = want.iter().filter(|n| !have.contains(n)).collect();
            let extra: Vec<_> = have.iter().filter(|n| !want.contains(n)).collect();
            return Err(IoError::Mismatch {
                path: self.path.clone(),
                what: "field set".into(),
                expected: format!("{want:?}"),
                found: format!("{have:?} (missing {missing:?}, not in this run {extra:?})"),
            });
        }
        Ok(())
    }

    /// Checks that the checkpoint is the part `part` of a decomposed run, or (`None`) that it is
    /// a single-domain one.
    pub fn expect_part(&self, part: Option<&Part>) -> Result<(), IoError> {
        let show = |p: Option<&Part>| match p {
            None => "a single domain".to_string(),
            Some(p) => format!(
                "part {} of {} (process grid {:?}, offset {:?}, extent {:?})",
                p.index, p.count, p.grid, p.offset, p.extent
            ),
        };
        self.differs("decomposition", &show(part), &show(self.part.as_ref()), self.part.as_ref() == part)
    }

    /// A scalar stored with [`Checkpoint::scalar`].
    pub fn get_scalar(&self, name: &str) -> Result<f64, IoError> {
        self.scalars.iter().find(|(n, _)| n == name).map(|(_, v)| *v).ok_or_else(|| IoError::Missing {
            path: self.path.clone(),
            name: name.to_string(),
            available: self.scalars.iter().map(|(n, _)| n.clone()).collect(),
        })
    }

    /// Checks that scalar `name` is `value`, bit for bit (a setting the run must share with the
    /// checkpoint, e.g. the time step); the error names both values.
    pub fn expect_scalar(&self, name: &str, value: f64) -> Result<(), IoError> {
        let stored = self.get_scalar(name)?;
        self.differs(name, &value.to_string(), &stored.to_string(), stored.to_bits() == value.to_bits())
    }

    /// Field `name` as a field of shape `like` (its interior, halo, order and alignment must be
    /// the stored ones) and element type `T`; the error names the difference.
    pub fn field<T: IoElement, const D: usize>(&self, name: &str, like: &Shape<D>) -> Result<Field<T, D>, IoError> {
        let stored = self.fields.iter().find(|f| f.name == name).ok_or_else(|| IoError::Missing {
            path: self.path.clone(),
            name: name.to_string(),
            available: self.field_names().iter().map(|n| n.to_string()).collect(),
        })?;
        let what = |w: &str| format!("{w} of field `{name}`");
        self.differs(&what("element type"), T::NAME, &tag_name(stored.tag), stored.tag == T::TAG)?;
        let mut probe = Field::<T, D>::try_zeros(*like)?;
        let size = std::mem::size_of::<T>();
        let elements = if stored.packed { probe.as_slice().len() } else { unpacked_len(like) };
        let same_shape = stored.interior == like.interior()
            && stored.halo == like.halo_widths()
            && stored.order == like.element_order()
            && stored.align == like.alignment()
            && stored.len == elements * size;
        self.differs(&what("shape"), &like.describe(), &stored.describe(), same_shape)?;
        if stored.packed {
            super::from_bytes(&stored.bytes, probe.as_mut_slice(), false);
        } else {
            let mut rows = vec![T::default(); elements];
            super::from_bytes(&stored.bytes, &mut rows, false);
            pack_rows(like, &rows, probe.as_mut_slice());
        }
        Ok(probe)
    }

    /// `Ok` when `same`, else an [`IoError::Mismatch`] of `what`.
    fn differs(&self, what: &str, expected: &str, found: &str, same: bool) -> Result<(), IoError> {
        if same {
            return Ok(());
        }
        Err(IoError::Mismatch {
            path: self.path.clone(),
            what: what.to_string(),
            expected: expected.to_string(),
            found: found.to_string(),
        })
    }

    fn encode_header(&self) -> Vec<u8> {
        let mut h = Vec::new();
        let str = |h: &mut Vec<u8>, s: &str| {
            h.extend_from_slice(&(s.len() as u32).to_le_bytes());
            h.extend_from_slice(s.as_bytes());
        };
        let u64s =
            |h: &mut Vec<u8>, v: &[usize]| v.iter().for_each(|&x| h.extend_from_slice(&(x as u64).to_le_bytes()));
        str(&mut h, &self.model);
        h.extend_from_slice(&self.step.to_le_bytes());
        h.extend_from_slice(&self.time.to_bits().to_le_bytes());
        h.extend_from_slice(&(self.global.len() as u32).to_le_bytes());
        u64s(&mut h, &self.global);
        match &self.part {
            None => h.push(0),
            Some(p) => {
                h.push(1);
                u64s(&mut h, &[p.index, p.count]);
                u64s(&mut h, &p.grid);
                u64s(&mut h, &p.offset);
                u64s(&mut h, &p.extent);
            }
        }
        h.extend_from_slice(&(self.scalars.len() as u32).to_le_bytes());
        for (name, v) in &self.scalars {
            str(&mut h, name);
            h.extend_from_slice(&v.to_bits().to_le_bytes());
        }
        h.extend_from_slice(&(self.fields.len() as u32).to_le_bytes());
        for f in &self.fields {
            str(&mut h, &f.name);
            h.push(f.tag);
            h.extend_from_slice(&(f.interior.len() as u32).to_le_bytes());
            u64s(&mut h, &f.interior);
            u64s(&mut h, &f.halo);
            h.push(if f.order == Order::Kij { 1 } else { 0 });
            u64s(&mut h, &[f.align, f.len]);
            h.extend_from_slice(&f.checksum.to_le_bytes());
        }
        h
    }

    fn read_impl(path: &Path, with_data: bool) -> Result<Checkpoint<'static>, IoError> {
        let _span =
            tracing::debug_span!(target: "stencil::io", "checkpoint_read", path = %path.display(), with_data).entered();
        let mut input = Input::open(path)?;
        let mut start = [0u8; 20];
        input.exact(&mut start, "the file's start").map_err(|e| match e {
            IoError::Malformed { path, .. } => {
                IoError::NotFormat { path, format: "checkpoint", found: "fewer than 20 bytes".into() }
            }
            e => e,
        })?;
        if &start[..8] != MAGIC {
            return Err(IoError::NotFormat {
                path: path.to_path_buf(),
                format: "checkpoint",
                found: format!("{:?}", String::from_utf8_lossy(&start[..8])),
            });
        }
        let version = u32::from_le_bytes(start[8..12].try_into().expect("4 bytes"));
        if !(1..=VERSION).contains(&version) {
            return Err(IoError::Unsupported {
                path: path.to_path_buf(),
                what: format!("checkpoint format version {version}; this build reads versions 1 to {VERSION}"),
                help: "restart with the build that wrote the checkpoint".into(),
            });
        }
        let len = u64::from_le_bytes(start[12..20].try_into().expect("8 bytes"));
        let file_len = std::fs::metadata(path).map_err(|e| IoError::os(path, "read", e))?.len();
        if len > file_len {
            return Err(IoError::malformed(path, format!("the header announces {len} bytes, the file has {file_len}")));
        }
        let header = input.bytes(len as usize, "the header")?;
        let mut sum = [0u8; 8];
        input.exact(&mut sum, "the header's checksum")?;
        let (recorded, computed) = (u64::from_le_bytes(sum), fnv1a(FNV_START, &header));
        if recorded != computed {
            return Err(IoError::Checksum { path: path.to_path_buf(), what: "the header".into(), recorded, computed });
        }
        let mut c = decode_header(&header, version >= 2).map_err(|what| IoError::malformed(path, what))?;
        c.path = path.to_path_buf();
        if with_data {
            for f in &mut c.fields {
                let what = format!("field `{}`", f.name);
                let bytes = input.bytes(f.len, &what)?;
                let computed = fnv1a(FNV_START, &bytes);
                if computed != f.checksum {
                    return Err(IoError::Checksum { path: path.to_path_buf(), what, recorded: f.checksum, computed });
                }
                f.bytes = Cow::Owned(bytes);
            }
            if !input.at_end()? {
                return Err(IoError::malformed(path, "bytes follow the last field"));
            }
        } else {
            let data: u64 = c.fields.iter().map(|f| f.len as u64).sum();
            let expected = 20 + len + 8 + data;
            if expected != file_len {
                return Err(IoError::malformed(
                    path,
                    format!("the header announces {expected} bytes, the file has {file_len}"),
                ));
            }
        }
        Ok(c)
    }
}

/// The pitch of a version-1 file's rows: the lead plus the row, rounded up to the alignment.
fn unpacked_pitch<const D: usize>(shape: &Shape<D>) -> usize {
    let row = shape.extent()[shape.contiguous_axis()];
    (shape.lead() + row).div_ceil(shape.alignment()) * shape.alignment()
}

/// Elements of a version-1 file's storage of `shape`.
fn unpacked_len<const D: usize>(shape: &Shape<D>) -> usize {
    if shape.points() == 0 {
        return 0;
    }
    let rows = shape.points() / shape.extent()[shape.contiguous_axis()];
    let slack = shape.len() - shape.lead() - shape.pitch() * rows;
    shape.lead() + unpacked_pitch(shape) * rows + slack
}

/// Moves each row of `shape` from a version-1 storage (`old`) to its place in `out` (today's).
fn pack_rows<T: Copy, const D: usize>(shape: &Shape<D>, old: &[T], out: &mut [T]) {
    let row = shape.extent()[shape.contiguous_axis()];
    if row == 0 {
        return;
    }
    let (lead, from, to) = (shape.lead(), unpacked_pitch(shape), shape.pitch());
    for r in 0..shape.points() / row {
        out[lead + r * to..][..row].copy_from_slice(&old[lead + r * from..][..row]);
    }
}

/// Parses a header (the checksum already checked).
fn decode_header(h: &[u8], packed: bool) -> Result<Checkpoint<'static>, String> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8], String> {
        let s = h.get(at..at + n).ok_or_else(|| format!("the header ends at byte {} before its end", h.len()))?;
        at += n;
        Ok(s)
    };
    macro_rules! u64v {
        () => {
            u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"))
        };
    }
    macro_rules! u32v {
        () => {
            u32::from_le_bytes(take(4)?.try_into().expect("4 bytes"))
        };
    }
    macro_rules! string {
        () => {{
            let n = u32v!() as usize;
            String::from_utf8(take(n)?.to_vec()).map_err(|_| "a name is not UTF-8".to_string())?
        }};
    }
    macro_rules! vecn {
        ($d:expr) => {{
            let mut v = Vec::with_capacity($d);
            for _ in 0..$d {
                v.push(u64v!() as usize);
            }
            v
        }};
    }
    let model = string!();
    let step = u64v!();
    let time = f64::from_bits(u64v!());
    let d = u32v!() as usize;
    if d > 8 {
        return Err(format!("the grid has {d} axes"));
    }
    let global = vecn!(d);
    let part = match take(1)?[0] {
        0 => None,
        _ => {
            let (index, count) = (u64v!() as usize, u64v!() as usize);
            Some(Part { index, count, grid: vecn!(d), offset: vecn!(d), extent: vecn!(d) })
        }
    };
    let mut scalars = Vec::new();
    for _ in 0..u32v!() {
        let name = string!();
        scalars.push((name, f64::from_bits(u64v!())));
    }
    let mut fields = Vec::new();
    for _ in 0..u32v!() {
        let name = string!();
        let tag = take(1)?[0];
        let axes = u32v!() as usize;
        if axes > 8 {
            return Err(format!("field `{name}` has {axes} axes"));
        }
        let (interior, halo) = (vecn!(axes), vecn!(axes));
        let order = if take(1)?[0] == 1 { Order::Kij } else { Order::Ijk };
        let (align, len, checksum) = (u64v!() as usize, u64v!() as usize, u64v!());
        fields.push(Stored {
            name,
            tag,
            interior,
            halo,
            order,
            align,
            checksum,
            len,
            packed,
            bytes: Cow::Owned(Vec::new()),
        });
    }
    if at != h.len() {
        return Err(format!("{} bytes follow the header's last entry", h.len() - at));
    }
    Ok(Checkpoint { model, step, time, global, part, scalars, fields, path: PathBuf::new() })
}

/// The file of part `index` of `count` of the checkpoint `path`: `path.part-INDEX-of-COUNT`.
pub fn part_path(path: impl AsRef<Path>, index: usize, count: usize) -> PathBuf {
    let mut p = path.as_ref().as_os_str().to_owned();
    p.push(format!(".part-{index}-of-{count}"));
    PathBuf::from(p)
}

/// Writes the parts of the checkpoint `path` that this process holds (`parts`, each with its
/// [`Part`]), one file each ([`part_path`]).
pub fn write_parts(path: impl AsRef<Path>, parts: &[Checkpoint<'_>]) -> Result<(), IoError> {
    for c in parts {
        let part = c.part.as_ref().ok_or_else(|| IoError::Unwritable {
            path: path.as_ref().to_path_buf(),
            what: "a part without its subdomain (`Checkpoint::with_part`)".into(),
        })?;
        c.write(part_path(&path, part.index, part.count))?;
    }
    Ok(())
}

/// The parts `local` (subdomain indices) of the decomposed checkpoint `path` for
/// decomposition `d`, after checking that every part of `d` is there (headers of the others
/// read and checked too), and that every part has the decomposition's process grid, its own
/// box, and the same model, step, time and grid as part 0.
pub fn read_parts<const D: usize>(
    path: impl AsRef<Path>,
    d: &Decomposition<D>,
    local: Range<usize>,
) -> Result<Vec<Checkpoint<'static>>, IoError> {
    let path = path.as_ref();
    let count = d.len();
    let missing: Vec<usize> = (0..count).filter(|&i| !part_path(path, i, count).is_file()).collect();
    if !missing.is_empty() {
        return Err(IoError::MissingParts { path: path.to_path_buf(), count, missing, written_for: part_counts(path) });
    }
    let mut first: Option<Checkpoint<'static>> = None;
    let mut out = Vec::new();
    for i in 0..count {
        let p = part_path(path, i, count);
        let c = if local.contains(&i) { Checkpoint::read(&p)? } else { Checkpoint::read_header(&p)? };
        c.expect_part(Some(&Part::of(d, i)))?;
        if let Some(f) = &first {
            let same = |what: &str, a: String, b: String| c.differs(what, &a, &b, a == b);
            same("model (against part 0)", format!("{:?}", f.model), format!("{:?}", c.model))?;
            same("step (against part 0)", f.step.to_string(), c.step.to_string())?;
            same("time (against part 0)", format!("{:e}", f.time), format!("{:e}", c.time))?;
            same("global grid (against part 0)", format!("{:?}", f.global), format!("{:?}", c.global))?;
        } else {
            first = Some(Checkpoint { fields: Vec::new(), ..c.clone() });
        }
        if local.contains(&i) {
            out.push(c);
        }
    }
    Ok(out)
}

/// The part counts `N` of the decomposed checkpoints `path` next to it (files
/// `path.part-0-of-N`), smallest first; empty when there is none.
pub fn part_counts(path: impl AsRef<Path>) -> Vec<usize> {
    let path = path.as_ref();
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return Vec::new() };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let prefix = format!("{}.part-0-of-", name.to_string_lossy());
    let mut counts: Vec<usize> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().strip_prefix(&prefix)?.parse().ok())
        .collect();
    counts.sort_unstable();
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::test_util::{random_field, temp_dir, Rng};

    /// A checkpoint of three random fields of different types and a scalar, written to `path`;
    /// the fields returned.
    fn sample(path: &Path, rng: &mut Rng) -> (Field<f64, 3>, Field<f32, 3>, Field<u32, 3>) {
        let shape = Shape::new([5, 4, 3]).halo(2);
        let u = random_field(shape, rng, |r| r.f64());
        let v = random_field(shape.order(Order::Kij), rng, |r| r.f64() as f32);
        let m = random_field(shape.halo(0), rng, |r| r.next() as u32);
        let mut c = Checkpoint::new("model", 17, 0.125, &[5, 4, 3]);
        c.push("u", &u).unwrap();
        c.push("v", &v).unwrap();
        c.push("mask", &m).unwrap();
        c.scalar("dt", 1.0 / 3.0);
        c.write(path).unwrap();
        (u, v, m)
    }

    #[test]
    fn a_version_1_file_restores_with_its_rows_moved() {
        // Version 1 padded each row to the lead plus the row: 9 cells after a lead of 30 took 64
        // elements per row, where they take 32 now.
        let dir = temp_dir("ckpt-v1");
        let mut rng = Rng(21);
        // The last shape holds no point (a version-1 writer stored no bytes for it).
        let empty = Shape::new([4, 0, 2]).halo_per_axis([1, 0, 0]);
        for shape in [Shape::new([5, 4, 3]).halo(2), Shape::new([5, 4, 3]).halo(2).order(Order::Kij), empty] {
            let u = random_field(shape, &mut rng, |r| r.f64());
            // The old storage, each point at the offset of the old strides (an independent
            // computation of the version-1 layout).
            let (c, e, lead, a) = (shape.contiguous_axis(), shape.extent(), shape.lead(), shape.alignment());
            let old_pitch = (lead + e[c]).div_ceil(a) * a;
            assert_ne!(old_pitch, shape.pitch(), "the test needs rows that moved");
            let axes = shape.element_order().axes::<3>();
            let mut strides = [0usize; 3];
            let mut step = 1;
            for (rank, &ax) in axes.iter().enumerate() {
                strides[ax] = step;
                step *= if rank == 0 { old_pitch } else { e[ax] };
            }
            let mut old = vec![0.0f64; if shape.points() == 0 { 0 } else { lead + step + a.max(8) }];
            for p in shape.storage_points() {
                old[lead + (0..3).map(|x| p[x] * strides[x]).sum::<usize>()] = u.as_slice()[shape.offset(p)];
            }
            let bytes = to_bytes(&old, false);
            let mut v1 = Checkpoint::new("model", 3, 0.5, &[5, 4, 3]);
            v1.fields.push(Stored {
                name: "u".into(),
                tag: f64::TAG,
                interior: shape.interior().to_vec(),
                halo: shape.halo_widths().to_vec(),
                order: shape.element_order(),
                align: a,
                checksum: fnv1a(FNV_START, &bytes),
                len: bytes.len(),
                packed: false,
                bytes,
            });
            let path = dir.join(format!("v1-{:?}", shape.element_order()));
            v1.write_version(&path, 1).unwrap();
            let back = Checkpoint::read(&path).unwrap().field::<f64, 3>("u", &shape).unwrap();
            for p in shape.storage_points() {
                let (want, got) = (u.as_slice()[shape.offset(p)], back.as_slice()[shape.offset(p)]);
                assert_eq!(want.to_bits(), got.to_bits(), "{p:?} of {}", shape.describe());
            }
            // Read as if it were version 2, the same bytes are refused: they do not fit the shape
            // (an empty field's are the same in both versions).
            if shape.points() == 0 {
                continue;
            }
            v1.write_version(&path, 2).unwrap();
            let e = Checkpoint::read(&path).unwrap().field::<f64, 3>("u", &shape).unwrap_err();
            assert!(e.to_string().contains("shape"), "{e}");
        }
    }

    #[test]
    fn non_finite_values_are_found_by_field_in_memory_and_read_back() {
        let dir = temp_dir("ckpt-nan");
        let mut rng = Rng(5);
        let (mut u, mut v, m) = sample(&dir.join("clean"), &mut rng);
        assert_eq!(Checkpoint::read(dir.join("clean")).unwrap().non_finite(), None);
        // A NaN in the f32 field and two infinities in the f64 one (one in its halo).
        v.set([1, 2, 0], f32::NAN).unwrap();
        u.set([0, 0, 0], f64::INFINITY).unwrap();
        u.set([-2, 0, 0], f64::NEG_INFINITY).unwrap();
        let mut c = Checkpoint::new("model", 1, 0.0, &[5, 4, 3]);
        c.push("mask", &m).unwrap();
        c.push("v", &v).unwrap();
        c.push("u", &u).unwrap();
        assert_eq!(c.non_finite(), Some(("v", 1)));
        c.write(dir.join("bad")).unwrap();
        let mut back = Checkpoint::new("model", 1, 0.0, &[5, 4, 3]);
        back.push("u", &u).unwrap();
        assert_eq!(back.non_finite(), Some(("u", 2)));
        assert_eq!(Checkpoint::read(dir.join("bad")).unwrap().non_finite(), Some(("v", 1)));
    }

    #[test]
    fn every_field_is_written_as_npy_with_its_interior() {
        let dir = temp_dir("ckpt-npy");
        let mut rng = Rng(9);
        let (u, v, m) = sample(&dir.join("c"), &mut rng);
        let back = Checkpoint::read(dir.join("c")).unwrap();
        let written = back.write_npy(&dir, "model-17").unwrap();
        let names: Vec<_> = written.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["model-17-u.npy", "model-17-v.npy", "model-17-mask.npy"]);
        let u2 = crate::io::npy::read::<f64, 3>(&written[0], 0).unwrap();
        let v2 = crate::io::npy::read::<f32, 3>(&written[1], 0).unwrap();
        let m2 = crate::io::npy::read::<u32, 3>(&written[2], 0).unwrap();
        fn same<T: IoElement>(a: &Field<T, 3>, b: &Field<T, 3>) -> bool {
            let n = a.shape().interior();
            a.shape().interior() == b.shape().interior()
                && (0..n[2] as isize).all(|k| {
                    (0..n[1] as isize).all(|j| (0..n[0] as isize).all(|i| a.get([i, j, k]) == b.get([i, j, k])))
                })
        }
        assert!(same(&u, &u2) && same(&v, &v2) && same(&m, &m2));
    }

    #[test]
    fn a_state_comes_back_bit_for_bit() {
        let dir = temp_dir("ckpt-rt");
        let path = dir.join("c");
        let (u, v, m) = sample(&path, &mut Rng(99));
        let c = Checkpoint::read(&path).unwrap();
        c.expect("model", &[5, 4, 3], &["mask", "u", "v"]).unwrap();
        c.expect_part(None).unwrap();
        assert_eq!((c.step, c.time, c.get_scalar("dt").unwrap()), (17, 0.125, 1.0 / 3.0));
        let u2: Field<f64, 3> = c.field("u", u.shape()).unwrap();
        let v2: Field<f32, 3> = c.field("v", v.shape()).unwrap();
        let m2: Field<u32, 3> = c.field("mask", m.shape()).unwrap();
        assert_eq!(
            u2.as_slice().iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            u.as_slice().iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        assert_eq!(v2.as_slice(), v.as_slice());
        assert_eq!(m2.as_slice(), m.as_slice());
        assert_eq!(Checkpoint::read_header(&path).unwrap().field_names(), ["u", "v", "mask"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fields_of_other_dimensions_than_the_grid_share_a_checkpoint() {
        let dir = temp_dir("ckpt-dims");
        let mut rng = Rng(8);
        let u = random_field(Shape::new([6, 5, 4]).halo(1), &mut rng, |r| r.f64());
        let series = random_field(Shape::new([3, 9]).align(1), &mut rng, |r| r.f64() as f32);
        let ids = random_field(Shape::new([11]), &mut rng, |r| r.next() as i32);
        let mut c = Checkpoint::new("m", 9, 0.5, &[6, 5, 4]);
        c.push("u", &u).unwrap();
        c.push("series", &series).unwrap();
        c.push("ids", &ids).unwrap();
        c.write(dir.join("c")).unwrap();
        let back = Checkpoint::read(dir.join("c")).unwrap();
        assert_eq!(back.field::<f64, 3>("u", u.shape()).unwrap().as_slice(), u.as_slice());
        assert_eq!(back.field::<f32, 2>("series", series.shape()).unwrap().as_slice(), series.as_slice());
        assert_eq!(back.field::<i32, 1>("ids", ids.shape()).unwrap().as_slice(), ids.as_slice());
        assert_eq!(back.field::<f32, 3>("series", &Shape::new([3, 9, 1]).align(1)).unwrap_err().code(), "S0408");
        assert!(c.push("u", &u).is_err(), "a name twice");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_difference_from_the_run_is_an_error_that_names_it() {
        let dir = temp_dir("ckpt-mismatch");
        let path = dir.join("c");
        let (u, ..) = sample(&path, &mut Rng(5));
        let c = Checkpoint::read(&path).unwrap();
        let check = |e: IoError, what: &str, texts: &[&str]| {
            assert_eq!(e.code(), "S0408", "{e}");
            let s = e.to_string();
            assert!(s.contains(what) && s.contains(path.to_str().unwrap()), "{s}");
            texts.iter().for_each(|t| assert!(s.contains(t), "{t} not in {s}"));
        };
        check(c.expect("other", &[5, 4, 3], &["mask", "u", "v"]).unwrap_err(), "model", &["\"model\"", "\"other\""]);
        check(
            c.expect("model", &[5, 4, 4], &["mask", "u", "v"]).unwrap_err(),
            "global grid",
            &["[5, 4, 3]", "[5, 4, 4]"],
        );
        check(
            c.expect("model", &[5, 4, 3], &["u", "v", "w"]).unwrap_err(),
            "field set",
            &["missing [\"w\"]", "[\"mask\"]"],
        );
        check(c.field::<f32, 3>("u", u.shape()).unwrap_err(), "element type of field `u`", &["f32", "f64"]);
        check(
            c.field::<f64, 3>("u", &u.shape().halo(1)).unwrap_err(),
            "shape of field `u`",
            &["halo [1, 1, 1]", "halo [2, 2, 2]"],
        );
        check(c.field::<f64, 3>("u", &u.shape().order(Order::Kij)).unwrap_err(), "shape of field `u`", &["Kij"]);
        check(c.field::<f64, 3>("u", &u.shape().with_interior([5, 4, 2])).unwrap_err(), "shape of field `u`", &[]);
        let d = Decomposition::new([5, 4, 3], [2, 1, 1], [false; 3], [2; 3]).unwrap();
        check(c.expect_part(Some(&Part::of(&d, 1))).unwrap_err(), "decomposition", &["part 1 of 2", "a single domain"]);
        let e = c.field::<f64, 3>("w", u.shape()).unwrap_err();
        assert_eq!(e.code(), "S0409");
        assert_eq!(c.get_scalar("t").unwrap_err().code(), "S0409");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn corrupt_truncated_or_foreign_files_are_refused() {
        let dir = temp_dir("ckpt-corrupt");
        let path = dir.join("c");
        sample(&path, &mut Rng(7));
        let good = std::fs::read(&path).unwrap();
        let bad = dir.join("bad");
        let read = |bytes: &[u8]| {
            std::fs::write(&bad, bytes).unwrap();
            Checkpoint::read(&bad).unwrap_err()
        };
        let header_len = u64::from_le_bytes(good[12..20].try_into().unwrap()) as usize;
        let mut rng = Rng(11);
        // Any flipped bit in the data: the field's checksum; in the header: the header's.
        for _ in 0..20 {
            let mut b = good.clone();
            let at = 20 + rng.below(good.len() - 20);
            b[at] ^= 1 << rng.below(8);
            let e = read(&b);
            let in_header = at < 20 + header_len + 8;
            assert_eq!(e.code(), "S0407", "byte {at}: {e}");
            assert!(e.to_string().contains(if in_header { "the header" } else { "field `" }), "byte {at}: {e}");
        }
        for cut in [good.len() - 1, good.len() - 500, 20 + header_len + 3, 30] {
            let e = read(&good[..cut]);
            assert_eq!(e.code(), "S0404", "cut at {cut}: {e}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(read(&longer).to_string().contains("follow the last field"));
        assert!(Checkpoint::read_header(&bad).is_err(), "the header alone sees the length too");
        let e = read(b"PK\x03\x04 not a checkpoint at all");
        assert_eq!(e.code(), "S0402");
        // A version after this build's, and version 0.
        for version in [VERSION + 1, 0] {
            let mut other = good.clone();
            other[8..12].copy_from_slice(&version.to_le_bytes());
            assert_eq!(read(&other).code(), "S0403", "version {version}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn decomposed_checkpoints_need_every_consistent_part() {
        let dir = temp_dir("ckpt-parts");
        let path = dir.join("run");
        let d = Decomposition::new([8, 6], [2, 2], [false; 2], [1; 2]).unwrap();
        let like = Shape::new([8, 6]).halo(1);
        let mut rng = Rng(3);
        let fields: Vec<Field<f64, 2>> =
            d.subdomains().map(|s| random_field(s.shape(&like), &mut rng, |r| r.f64())).collect();
        let write = |step: u64, which: Range<usize>| {
            let parts: Vec<Checkpoint> = which
                .map(|i| {
                    let mut c = Checkpoint::new("m", step, 1.5, &[8, 6]).with_part(Part::of(&d, i));
                    c.push("u", &fields[i]).unwrap();
                    c
                })
                .collect();
            write_parts(&path, &parts).unwrap();
        };
        write(10, 0..4);
        let local = read_parts(&path, &d, 2..4).unwrap();
        assert_eq!(local.len(), 2);
        for (c, i) in local.iter().zip(2..4) {
            let s = d.subdomain(i);
            assert_eq!(c.field::<f64, 2>("u", &s.shape(&like)).unwrap().as_slice(), fields[i].as_slice());
        }
        // A part of another step.
        write(11, 1..2);
        let e = read_parts(&path, &d, 0..1).unwrap_err();
        assert!(e.to_string().contains("step (against part 0)") && e.to_string().contains("11"), "{e}");
        write(10, 1..2);
        // A missing part.
        std::fs::remove_file(part_path(&path, 3, 4)).unwrap();
        let e = read_parts(&path, &d, 0..4).unwrap_err();
        assert_eq!(e.code(), "S0411");
        assert!(e.to_string().contains("parts [3] of the 4"), "{e}");
        // Another decomposition: no part of that count, and the message says which there are.
        let d2 = Decomposition::new([8, 6], [1, 2], [false; 2], [1; 2]).unwrap();
        let e = read_parts(&path, &d2, 0..2).unwrap_err();
        assert!(e.to_string().contains("parts of a run of [4] subdomains"), "{e}");
        // A part renamed into another's place: its box differs.
        std::fs::copy(part_path(&path, 2, 4), part_path(&path, 3, 4)).unwrap();
        let e = read_parts(&path, &d, 0..4).unwrap_err();
        assert_eq!(e.code(), "S0408");
        assert!(e.to_string().contains("decomposition") && e.to_string().contains("part 3 of 4"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
