//! numpy's `.npy` files: a field's interior written as an array `a[i, j, k]` (the
//! [axis convention](super#axis-convention)), and arrays numpy wrote read into fields.
//!
//! Reads format versions 1.0, 2.0 and 3.0, element types `<f4`, `<f8`, `<i4`, `<u4` (`=` and
//! `|` prefixes too on a little-endian machine), C or Fortran order (both read correctly:
//! axis `a` of the array is the field's axis `a` either way). Big-endian arrays (`>f4`),
//! other element types, structured and object arrays are refused with an [`IoError`] that
//! says how to convert them in numpy.
//!
//! Writing and reading stream the field's rows between the file and the field's storage: a
//! row along the field's contiguous axis is written from (read into) the storage directly,
//! without a copy of the field, whenever the file's fastest axis is that axis (every
//! `Order::Ijk` field and 1D field, and `Order::Kij` 2D fields).

use super::{read_interior, write_interior, Input, IoElement, IoError, Output};
use crate::field::{Field, Shape};
use std::path::Path;

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// What the header of a `.npy` file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Format version `(major, minor)`: 1.0, 2.0 or 3.0.
    pub version: (u8, u8),
    /// numpy's type string, e.g. `<f4`.
    pub descr: String,
    /// Whether the data is in Fortran order (first axis fastest).
    pub fortran_order: bool,
    /// The array's shape.
    pub shape: Vec<usize>,
}

impl Header {
    /// The file's axes from fastest to slowest.
    fn file_axes<const D: usize>(&self) -> [usize; D] {
        std::array::from_fn(|r| if self.fortran_order { r } else { D - 1 - r })
    }
}

/// The header of the `.npy` file at `path`.
pub fn header(path: impl AsRef<Path>) -> Result<Header, IoError> {
    let path = path.as_ref();
    let mut input = Input::open(path)?;
    read_header(&mut input)
}

/// The interior of `field` as a `.npy` file: an array of the interior's shape indexed
/// `a[i, j, k]` (the field's global index order), element type `field`'s (`<f4`, `<f8`, `<i4`,
/// `<u4`). An `Order::Ijk` field is written in Fortran order, a `Kij` 2D field in C order, each
/// row straight from the field's storage; a `Kij` 3D field in C order through a row buffer.
/// The file is written under a temporary name and renamed when complete.
pub fn write<T: IoElement, const D: usize>(path: impl AsRef<Path>, field: &Field<T, D>) -> Result<(), IoError> {
    let path = path.as_ref();
    let _span = tracing::debug_span!(target: "stencil::io", "npy_write", path = %path.display(), field = field.shape().describe())
        .entered();
    let axes = field.shape().element_order().axes::<D>();
    let fortran_order = D > 1 && axes == std::array::from_fn(|r| r);
    let header =
        Header { version: (1, 0), descr: T::NPY.to_string(), fortran_order, shape: field.shape().interior().to_vec() };
    let mut out = Output::create(path)?;
    out.put(&encode_header(&header))?;
    write_interior(&mut out, field, header.file_axes::<D>(), false)?;
    out.finish()
}

/// The array of the `.npy` file at `path` as a field with halo `halo` on every side (zero) and
/// the default order (`Order::Ijk`) and alignment. See [`read_like`] for other shapes.
pub fn read<T: IoElement, const D: usize>(path: impl AsRef<Path>, halo: usize) -> Result<Field<T, D>, IoError> {
    read_like(path, Shape::new([0; D]).halo(halo))
}

/// The array of the `.npy` file at `path` as a field of `like`'s halo, order and alignment and
/// the array's shape as interior (`like`'s interior is ignored); the halo is zero.
///
/// Errors: the file is not a `.npy` file, is damaged or cut short, holds another element type
/// than `T` or another number of axes than `D`, or uses what this reader refuses (module docs);
/// the memory for the field cannot be had.
pub fn read_like<T: IoElement, const D: usize>(path: impl AsRef<Path>, like: Shape<D>) -> Result<Field<T, D>, IoError> {
    let path = path.as_ref();
    let _span = tracing::debug_span!(target: "stencil::io", "npy_read", path = %path.display()).entered();
    let mut input = Input::open(path)?;
    let header = read_header(&mut input)?;
    check_type::<T>(path, &header)?;
    let n: [usize; D] = header.shape.clone().try_into().map_err(|_| IoError::Unsupported {
        path: path.to_path_buf(),
        what: format!(
            "the array has {} axes (shape {:?}), but a {D}D field was asked for",
            header.shape.len(),
            header.shape
        ),
        help: format!("read it into a field of {} dimensions, or reshape it in numpy", header.shape.len()),
    })?;
    check_length::<T, _>(&mut input, &header)?;
    let mut field = Field::try_zeros(like.with_interior(n))?;
    read_interior(&mut input, &mut field, header.file_axes::<D>(), false, "the array's data")?;
    Ok(field)
}

/// Reads the array of the `.npy` file at `path` into the interior of `field`, whose interior
/// must have the array's shape; the halo is left as it is. Nothing is written to `field` unless
/// the header fits; a file cut short leaves the interior partly read (and returns the error).
pub fn read_into<T: IoElement, const D: usize>(path: impl AsRef<Path>, field: &mut Field<T, D>) -> Result<(), IoError> {
    let path = path.as_ref();
    let _span = tracing::debug_span!(target: "stencil::io", "npy_read", path = %path.display()).entered();
    let mut input = Input::open(path)?;
    let header = read_header(&mut input)?;
    check_type::<T>(path, &header)?;
    let n = field.shape().interior();
    if header.shape != n {
        return Err(IoError::WrongShape {
            path: path.to_path_buf(),
            name: String::new(),
            expected: n.to_vec(),
            found: header.shape,
        });
    }
    check_length::<T, _>(&mut input, &header)?;
    read_interior(&mut input, field, header.file_axes::<D>(), false, "the array's data")
}

/// Refuses a file shorter than its header announces (before a field is allocated for it).
fn check_length<T: IoElement, R: std::io::Read>(input: &mut Input<R>, header: &Header) -> Result<(), IoError> {
    let file_len = std::fs::metadata(&input.path).map_err(|e| IoError::os(&input.path, "read", e))?.len();
    let need = header
        .shape
        .iter()
        .try_fold(std::mem::size_of::<T>() as u64, |n, &d| n.checked_mul(d as u64))
        .and_then(|n| n.checked_add(input.at));
    match need {
        Some(need) if need <= file_len => Ok(()),
        _ => Err(IoError::malformed(
            &input.path,
            format!(
                "the header announces an array of shape {:?}, more than the file's {file_len} bytes hold",
                header.shape
            ),
        )),
    }
}

/// Refuses an element type other than `T`'s, and what this reader does not take.
fn check_type<T: IoElement>(path: &Path, header: &Header) -> Result<(), IoError> {
    let d = header.descr.as_str();
    let (order, code) = d.split_at(d.len().min(1));
    let native = if cfg!(target_endian = "little") { "<" } else { ">" };
    let known = ["f4", "f8", "i4", "u4"].contains(&code);
    if known && (order == "<" || order == "=" || order == "|") && !(order == "=" && native == ">") {
        let normalised = format!("<{code}");
        if normalised == T::NPY {
            return Ok(());
        }
        return Err(IoError::WrongType {
            path: path.to_path_buf(),
            name: String::new(),
            expected: format!("{} ({})", T::NAME, T::NPY),
            found: format!("{} ({d})", dsl_name(code)),
        });
    }
    if known && (order == ">" || order == "=") {
        return Err(IoError::Unsupported {
            path: path.to_path_buf(),
            what: format!("the array is big-endian ('{d}'); this reader takes little-endian data"),
            help: format!("convert it in numpy: np.save(path, a.astype('<{code}'))"),
        });
    }
    Err(IoError::Unsupported {
        path: path.to_path_buf(),
        what: format!("element type '{d}' is not one a field holds ('<f4', '<f8', '<i4', '<u4')"),
        help: format!("convert it in numpy, e.g. np.save(path, a.astype('{}'))", T::NPY),
    })
}

/// The DSL name of a numpy type code.
fn dsl_name(code: &str) -> &'static str {
    match code {
        "f4" => "f32",
        "f8" => "f64",
        "i4" => "i32",
        _ => "u32",
    }
}

/// The bytes of a header: magic, version, length, the dictionary padded with spaces to a
/// multiple of 64 bytes and ended by a newline (version 2.0 when the dictionary needs it).
fn encode_header(h: &Header) -> Vec<u8> {
    let shape = match h.shape.as_slice() {
        [n] => format!("({n},)"),
        s => format!("({})", s.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let fortran = if h.fortran_order { "True" } else { "False" };
    let mut dict = format!("{{'descr': '{}', 'fortran_order': {fortran}, 'shape': {shape}, }}", h.descr);
    let long = dict.len() + 11 > 65535;
    let prefix = if long { 12 } else { 10 };
    while !(prefix + dict.len() + 1).is_multiple_of(64) {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = Vec::with_capacity(prefix + dict.len());
    out.extend_from_slice(MAGIC);
    if long {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(dict.len() as u32).to_le_bytes());
    } else {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out
}

/// Reads and parses the header; `input` is left at the first data byte.
fn read_header<R: std::io::Read>(input: &mut Input<R>) -> Result<Header, IoError> {
    let path = input.path.clone();
    let mut start = [0u8; 8];
    if let Err(e) = input.exact(&mut start, "the header") {
        return Err(match e {
            IoError::Malformed { .. } => {
                IoError::NotFormat { path, format: ".npy", found: "fewer than 8 bytes".into() }
            }
            e => e,
        });
    }
    if &start[..6] != MAGIC {
        return Err(IoError::NotFormat {
            path,
            format: ".npy",
            found: format!("{:?}", String::from_utf8_lossy(&start[..6])),
        });
    }
    let version = (start[6], start[7]);
    let len = match version.0 {
        1 => {
            let mut b = [0u8; 2];
            input.exact(&mut b, "the header length")?;
            u16::from_le_bytes(b) as usize
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            input.exact(&mut b, "the header length")?;
            u32::from_le_bytes(b) as usize
        }
        _ => {
            return Err(IoError::Unsupported {
                path,
                what: format!("format version {}.{}; this reader takes 1.0, 2.0 and 3.0", version.0, version.1),
                help: "save it again with numpy's np.save".into(),
            })
        }
    };
    let dict = input.bytes(len, "the header")?;
    let dict = String::from_utf8(dict).map_err(|_| IoError::malformed(&path, "the header is not text"))?;
    let (descr, fortran_order, shape) = parse_dict(&dict).map_err(|what| IoError::malformed(&path, what))?;
    Ok(Header { version, descr, fortran_order, shape })
}

/// The three entries of the header's dictionary, or what is wrong with it.
fn parse_dict(dict: &str) -> Result<(String, bool, Vec<usize>), String> {
    let bad = |what: &str| format!("the header {dict:?} {what}");
    let value = |key: &str| -> Result<&str, String> {
        let at = dict
            .find(&format!("'{key}'"))
            .or_else(|| dict.find(&format!("\"{key}\"")))
            .ok_or_else(|| bad(&format!("has no '{key}'")))?;
        let rest = &dict[at + key.len() + 2..];
        let colon = rest.find(':').ok_or_else(|| bad(&format!("has no value for '{key}'")))?;
        Ok(rest[colon + 1..].trim_start())
    };
    let d = value("descr")?;
    let descr = match d.chars().next() {
        Some(q @ ('\'' | '"')) => {
            let end = d[1..].find(q).ok_or_else(|| bad("has an unterminated 'descr'"))?;
            d[1..1 + end].to_string()
        }
        _ => {
            // A list: a structured type, which the caller refuses by its text.
            d.split('}').next().unwrap_or(d).trim_end_matches([',', ' ']).to_string()
        }
    };
    let f = value("fortran_order")?;
    let fortran_order = if f.starts_with("True") {
        true
    } else if f.starts_with("False") {
        false
    } else {
        return Err(bad("has a 'fortran_order' that is neither True nor False"));
    };
    let s = value("shape")?;
    let close = s.find(')').filter(|_| s.starts_with('(')).ok_or_else(|| bad("has a 'shape' that is not a tuple"))?;
    let shape = s[1..close]
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| v.trim_end_matches('L').parse::<usize>().map_err(|_| bad(&format!("has a shape entry {v:?}"))))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((descr, fortran_order, shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_aligned_and_parse_back() {
        for shape in [vec![5], vec![3, 4], vec![7, 1, 9]] {
            for fortran_order in [false, true] {
                let h = Header { version: (1, 0), descr: "<f8".into(), fortran_order, shape: shape.clone() };
                let bytes = encode_header(&h);
                assert_eq!(bytes.len() % 64, 0);
                assert_eq!(*bytes.last().unwrap(), b'\n');
                let mut input = Input { inner: std::io::Cursor::new(bytes), path: "mem.npy".into(), at: 0 };
                assert_eq!(read_header(&mut input).unwrap(), h);
            }
        }
    }

    #[test]
    fn dictionaries_numpy_writes_parse() {
        let (d, f, s) = parse_dict("{'descr': '<u4', 'fortran_order': False, 'shape': (2, 3), }          \n").unwrap();
        assert_eq!((d.as_str(), f, s), ("<u4", false, vec![2, 3]));
        let (_, f, s) = parse_dict("{\"descr\": \"<f4\", \"fortran_order\": True, \"shape\": (6L,)}").unwrap();
        assert_eq!((f, s), (true, vec![6]));
        assert!(parse_dict("{'descr': '<f4', 'shape': (2,)}").unwrap_err().contains("fortran_order"));
    }
}

#[cfg(test)]
mod file_tests {
    use super::*;
    use crate::field::Order;
    use crate::io::test_util::{random_field, temp_dir, Rng};
    use crate::io::IoElement;

    fn round_trip<T: IoElement, const D: usize>(rng: &mut Rng, dir: &Path, make: impl Fn(&mut Rng) -> T)
    where
        ndarray::Dim<[usize; D]>: ndarray::Dimension,
    {
        for order in [Order::Ijk, Order::Kij] {
            let n: [usize; D] = std::array::from_fn(|_| 1 + rng.below(9));
            let shape = Shape::new(n).halo(rng.below(3)).order(order);
            let f = random_field(shape, rng, &make);
            let path = dir.join(format!("rt-{}-{D}-{order:?}.npy", T::NAME));
            write(&path, &f).unwrap();
            let h = header(&path).unwrap();
            assert_eq!(h.shape, n.to_vec());
            assert_eq!(h.descr, T::NPY);
            // Into another halo, order and alignment: the same interior.
            let other = if order == Order::Ijk { Order::Kij } else { Order::Ijk };
            let g: Field<T, D> = read_like(&path, Shape::new([0; D]).halo(2).order(other).align(4)).unwrap();
            assert_eq!(g.to_array(), f.to_array(), "{} {D}D {order:?}", T::NAME);
            assert_eq!(g.get([-1; D]), Some(T::default()), "the halo is zero");
            let mut h = Field::<T, D>::zeros(shape);
            read_into(&path, &mut h).unwrap();
            assert_eq!(h.interior_view(), f.interior_view());
        }
    }

    #[test]
    fn random_fields_round_trip_for_every_type_dimension_and_order() {
        let dir = temp_dir("npy-rt");
        let mut rng = Rng(0x1234_5678);
        for _ in 0..3 {
            round_trip::<f32, 1>(&mut rng, &dir, |r| r.f64() as f32);
            round_trip::<f32, 2>(&mut rng, &dir, |r| r.f64() as f32);
            round_trip::<f32, 3>(&mut rng, &dir, |r| r.f64() as f32);
            round_trip::<f64, 3>(&mut rng, &dir, |r| r.f64());
            round_trip::<f64, 2>(&mut rng, &dir, |r| r.f64());
            round_trip::<i32, 3>(&mut rng, &dir, |r| r.next() as i32);
            round_trip::<i32, 1>(&mut rng, &dir, |r| r.next() as i32);
            round_trip::<u32, 2>(&mut rng, &dir, |r| r.next() as u32);
            round_trip::<u32, 3>(&mut rng, &dir, |r| r.next() as u32);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A `.npy` file of `values` (in the file's order) built by hand, as numpy lays it out.
    fn hand_made(path: &Path, dict: &str, version: u8, data: &[u8]) {
        let mut dict = dict.to_string();
        let prefix = if version == 1 { 10 } else { 12 };
        while !(prefix + dict.len() + 1).is_multiple_of(64) {
            dict.push(' ');
        }
        dict.push('\n');
        let mut bytes = b"\x93NUMPY".to_vec();
        bytes.extend_from_slice(&[version, 0]);
        if version == 1 {
            bytes.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        } else {
            bytes.extend_from_slice(&(dict.len() as u32).to_le_bytes());
        }
        bytes.extend_from_slice(dict.as_bytes());
        bytes.extend_from_slice(data);
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn c_and_fortran_order_files_read_as_numpy_indexes_them() {
        let dir = temp_dir("npy-orders");
        let n = [3usize, 4, 5];
        // a[i, j, k] = 100 i + 10 j + k, in C order (k fastest) and in Fortran order (i fastest).
        let value = |i: usize, j: usize, k: usize| (100 * i + 10 * j + k) as f64;
        let (mut c, mut f) = (Vec::new(), Vec::new());
        for i in 0..n[0] {
            for j in 0..n[1] {
                for k in 0..n[2] {
                    c.extend_from_slice(&value(i, j, k).to_le_bytes());
                }
            }
        }
        for k in 0..n[2] {
            for j in 0..n[1] {
                for i in 0..n[0] {
                    f.extend_from_slice(&value(i, j, k).to_le_bytes());
                }
            }
        }
        for (version, fortran, data) in [(1, false, &c), (2, true, &f), (3, false, &c), (1, true, &f)] {
            let path = dir.join(format!("o-{version}-{fortran}.npy"));
            let flag = if fortran { "True" } else { "False" };
            hand_made(
                &path,
                &format!("{{'descr': '<f8', 'fortran_order': {flag}, 'shape': (3, 4, 5), }}"),
                version,
                data,
            );
            for order in [Order::Ijk, Order::Kij] {
                let field: Field<f64, 3> = read_like(&path, Shape::new([0; 3]).halo(1).order(order)).unwrap();
                for i in 0..3 {
                    for j in 0..4 {
                        for k in 0..5 {
                            assert_eq!(field.get([i, j, k]), Some(value(i as usize, j as usize, k as usize)));
                        }
                    }
                }
            }
        }
        // What we write is laid out as the header says: an Ijk field in Fortran order, a Kij 3D
        // field in C order; the data bytes are exactly the hand-made ones.
        let field = Field::<f64, 3>::from_fn(Shape::new(n).halo(1), |[i, j, k]| (100 * i + 10 * j + k) as f64);
        for (order, fortran, data) in [(Order::Ijk, true, &f), (Order::Kij, false, &c)] {
            let path = dir.join(format!("w-{order:?}.npy"));
            let mut g = Field::zeros(field.shape().order(order));
            g.interior_view_mut().assign(&field.interior_view());
            write(&path, &g).unwrap();
            assert_eq!(header(&path).unwrap().fortran_order, fortran);
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(&bytes[bytes.len() - data.len()..], &data[..], "{order:?}");
            assert_eq!((bytes.len() - data.len()) % 64, 0);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refusals_name_the_file_what_was_expected_and_what_was_found() {
        let dir = temp_dir("npy-errors");
        let p = |name: &str| dir.join(name);
        let data = vec![0u8; 24];
        hand_made(&p("big.npy"), "{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }", 1, &data);
        let e = read::<f32, 1>(p("big.npy"), 0).unwrap_err();
        assert_eq!(e.code(), "S0403");
        assert!(e.to_string().contains("big-endian") && e.to_string().contains("big.npy"), "{e}");
        assert!(e.help().contains("astype('<f4')"), "{e}");

        hand_made(&p("half.npy"), "{'descr': '<f2', 'fortran_order': False, 'shape': (6,), }", 1, &data);
        let e = read::<f32, 1>(p("half.npy"), 0).unwrap_err();
        assert_eq!(e.code(), "S0403");
        assert!(e.to_string().contains("'<f2'"), "{e}");

        hand_made(&p("f8.npy"), "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 1, &data);
        let e = read::<f32, 1>(p("f8.npy"), 0).unwrap_err();
        assert_eq!(e.code(), "S0405");
        assert!(e.to_string().contains("f64 (<f8)") && e.to_string().contains("f32 (<f4)"), "{e}");

        let e = read::<f64, 2>(p("f8.npy"), 0).unwrap_err();
        assert_eq!(e.code(), "S0403");
        assert!(e.to_string().contains("1 axes") && e.to_string().contains("2D"), "{e}");

        let mut f = Field::<f64, 1>::zeros(Shape::new([4]));
        let e = read_into(p("f8.npy"), &mut f).unwrap_err();
        assert_eq!(e.code(), "S0406");
        assert!(e.to_string().contains("[3]") && e.to_string().contains("[4]"), "{e}");

        hand_made(&p("short.npy"), "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", 1, &data);
        let e = read::<f64, 1>(p("short.npy"), 0).unwrap_err();
        assert_eq!(e.code(), "S0404");
        assert!(e.to_string().contains("shape [4], more than the file's 152 bytes hold"), "{e}");

        std::fs::write(p("text.npy"), "hello world").unwrap();
        let e = read::<f64, 1>(p("text.npy"), 0).unwrap_err();
        assert_eq!(e.code(), "S0402");
        assert!(e.to_string().contains("not a .npy file"), "{e}");

        hand_made(&p("v9.npy"), "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 9, &data);
        assert_eq!(read::<f64, 1>(p("v9.npy"), 0).unwrap_err().code(), "S0403");

        let e = read::<f64, 1>(p("missing.npy"), 0).unwrap_err();
        assert_eq!(e.code(), "S0401");
        assert!(e.to_string().contains("missing.npy"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(test)]
mod damaged {
    use super::*;
    use crate::io::test_util::{random_field, temp_dir, Rng};

    /// Damaged files (header bytes changed, cut short) give errors, never panics.
    #[test]
    fn damaged_files_are_errors_not_panics() {
        let dir = temp_dir("npy-damaged");
        let mut rng = Rng(78);
        let f = random_field(Shape::new([6, 5, 4]), &mut rng, |r| r.f64());
        let good_path = dir.join("good.npy");
        write(&good_path, &f).unwrap();
        let good = std::fs::read(&good_path).unwrap();
        let path = dir.join("bad.npy");
        for i in 0..600 {
            let mut b = good.clone();
            if i % 3 == 0 {
                b.truncate(rng.below(good.len()));
            } else {
                for _ in 0..1 + rng.below(3) {
                    let at = rng.below(128);
                    b[at] = if rng.below(2) == 0 { rng.next() as u8 } else { b"0123456789(),' FT<>"[rng.below(19)] };
                }
            }
            std::fs::write(&path, &b).unwrap();
            let _ = read::<f64, 3>(&path, 1);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
