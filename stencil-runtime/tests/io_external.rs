//! The `.npy` and NetCDF readers and writers against numpy, scipy and ncgen/ncdump: driven by
//! `scripts/check-npy-netcdf`, which writes files with those tools into `$STENCIL_IO_DIR/in`
//! (with a manifest and each array's raw bytes), runs these tests, and checks with numpy, scipy
//! and ncdump what they wrote into `$STENCIL_IO_DIR/out`. Ignored in a plain `cargo test`
//! (they need the files): `scripts/check-npy-netcdf` runs them.
#![cfg(feature = "netcdf")]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use stencil_runtime::io::netcdf::{Axis, Dataset, Writer};
use stencil_runtime::io::{npy, IoElement};
use stencil_runtime::{Field, Order, Shape};

fn dir() -> PathBuf {
    PathBuf::from(std::env::var("STENCIL_IO_DIR").expect("STENCIL_IO_DIR: run scripts/check-npy-netcdf"))
}

/// The values of `field`'s interior as little-endian bytes in C order over `[i, j, k]`, or
/// (`reversed`) over `[k, j, i]` (a NetCDF variable's order).
fn c_order_bytes<T: IoElement, const D: usize>(field: &Field<T, D>, reversed: bool) -> Vec<u8>
where
    ndarray::Dim<[usize; D]>: ndarray::Dimension,
{
    let view = field.interior_view();
    let view = if reversed { view.reversed_axes() } else { view };
    let mut out = Vec::new();
    view.iter().for_each(|v| v.put_le(&mut out));
    out
}

/// Reads the fixture `file` as a `D`-dimensional field of `T` and compares it with `raw`.
fn check_read<T: IoElement, const D: usize>(kind: &str, file: &Path, var: &str, shape: &[usize], raw: &[u8]) -> String
where
    ndarray::Dim<[usize; D]>: ndarray::Dimension,
{
    let (field, reversed): (Field<T, D>, bool) = match kind {
        "npy" => (npy::read(file, 1).unwrap_or_else(|e| panic!("{e}")), false),
        _ => (Dataset::open(file).and_then(|d| d.read(var, 2)).unwrap_or_else(|e| panic!("{e}")), true),
    };
    let mut interior = field.shape().interior().to_vec();
    if reversed {
        interior.reverse();
    }
    assert_eq!(interior, shape, "{}", file.display());
    assert!(c_order_bytes(&field, reversed) == raw, "{} {var}: values differ from numpy's", file.display());
    format!("ok {} {var} {} {shape:?}", file.display(), T::NAME)
}

#[test]
#[ignore = "needs files from numpy, scipy and ncgen: run scripts/check-npy-netcdf"]
fn reads_what_numpy_scipy_and_ncgen_wrote() {
    let dir = dir().join("in");
    let manifest = std::fs::read_to_string(dir.join("manifest.txt")).expect("the manifest");
    let mut checked = 0;
    for line in manifest.lines().filter(|l| !l.trim().is_empty()) {
        // kind file var dtype shape raw   |   error kind file var dtype dims code
        let w: Vec<&str> = line.split_whitespace().collect();
        if w[0] == "error" {
            let (kind, file, var, dtype, dims, code) = (w[1], dir.join(w[2]), w[3], w[4], w[5], w[6]);
            let e = match (kind, dtype, dims) {
                ("npy", "f4", "1") => npy::read::<f32, 1>(&file, 0).map(drop).unwrap_err(),
                ("npy", "f4", "2") => npy::read::<f32, 2>(&file, 0).map(drop).unwrap_err(),
                ("npy", "f8", "1") => npy::read::<f64, 1>(&file, 0).map(drop).unwrap_err(),
                ("nc", "f8", "2") => Dataset::open(&file).and_then(|d| d.read::<f64, 2>(var, 0)).map(drop).unwrap_err(),
                ("nc", "f8", "1") => Dataset::open(&file).and_then(|d| d.read::<f64, 1>(var, 0)).map(drop).unwrap_err(),
                other => panic!("manifest: unknown error case {other:?}"),
            };
            assert_eq!(e.code(), code, "{}: {e}", file.display());
            println!("refused as expected ({code}): {}", e.message());
            checked += 1;
            continue;
        }
        let (kind, file, var, dtype) = (w[0], dir.join(w[1]), w[2], w[3]);
        let shape: Vec<usize> = w[4].split(',').map(|v| v.parse().expect("a length")).collect();
        let raw = std::fs::read(dir.join(w[5])).expect("raw bytes");
        let line = match (dtype, shape.len()) {
            ("f4", 1) => check_read::<f32, 1>(kind, &file, var, &shape, &raw),
            ("f4", 2) => check_read::<f32, 2>(kind, &file, var, &shape, &raw),
            ("f4", 3) => check_read::<f32, 3>(kind, &file, var, &shape, &raw),
            ("f8", 1) => check_read::<f64, 1>(kind, &file, var, &shape, &raw),
            ("f8", 2) => check_read::<f64, 2>(kind, &file, var, &shape, &raw),
            ("f8", 3) => check_read::<f64, 3>(kind, &file, var, &shape, &raw),
            ("i4", 1) => check_read::<i32, 1>(kind, &file, var, &shape, &raw),
            ("i4", 2) => check_read::<i32, 2>(kind, &file, var, &shape, &raw),
            ("i4", 3) => check_read::<i32, 3>(kind, &file, var, &shape, &raw),
            ("u4", 1) => check_read::<u32, 1>(kind, &file, var, &shape, &raw),
            ("u4", 2) => check_read::<u32, 2>(kind, &file, var, &shape, &raw),
            ("u4", 3) => check_read::<u32, 3>(kind, &file, var, &shape, &raw),
            other => panic!("manifest: unknown case {other:?}"),
        };
        println!("{line}");
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} cases in the manifest");
}

/// xorshift64*.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn f64(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 * 200.0 - 100.0
    }
}

/// Writes a random field as `.npy` and its raw C-order bytes, and a manifest line.
fn write_npy<T: IoElement, const D: usize>(
    out: &Path,
    manifest: &mut String,
    rng: &mut Rng,
    n: [usize; D],
    order: Order,
    make: impl Fn(&mut Rng) -> T,
) where
    ndarray::Dim<[usize; D]>: ndarray::Dimension,
{
    let field = Field::from_fn(Shape::new(n).halo(2).order(order), |_| make(rng));
    let name = format!("{}-{D}d-{order:?}", T::NAME);
    npy::write(out.join(format!("{name}.npy")), &field).unwrap();
    std::fs::write(out.join(format!("{name}.raw")), c_order_bytes(&field, false)).unwrap();
    let shape: Vec<String> = n.iter().map(|v| v.to_string()).collect();
    writeln!(manifest, "npy {name}.npy - {} {} {name}.raw", &T::NPY[1..], shape.join(",")).unwrap();
}

#[test]
#[ignore = "checked by numpy, scipy and ncdump: run scripts/check-npy-netcdf"]
fn writes_what_numpy_scipy_and_ncdump_read() {
    let out = dir().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let mut manifest = String::new();
    let mut rng = Rng(0x5eed);
    for order in [Order::Ijk, Order::Kij] {
        write_npy::<f32, 1>(&out, &mut manifest, &mut rng, [7], order, |r| r.f64() as f32);
        write_npy::<f32, 2>(&out, &mut manifest, &mut rng, [5, 3], order, |r| r.f64() as f32);
        write_npy::<f32, 3>(&out, &mut manifest, &mut rng, [6, 4, 3], order, |r| r.f64() as f32);
        write_npy::<f64, 3>(&out, &mut manifest, &mut rng, [3, 5, 4], order, |r| r.f64());
        write_npy::<f64, 2>(&out, &mut manifest, &mut rng, [9, 2], order, |r| r.f64());
        write_npy::<i32, 3>(&out, &mut manifest, &mut rng, [2, 3, 4], order, |r| r.next() as i32);
        write_npy::<u32, 2>(&out, &mut manifest, &mut rng, [4, 6], order, |r| r.next() as u32);
    }
    // NetCDF: three 3D fields of three types on one grid with coordinates, in both formats.
    let n = [6, 5, 4];
    let shape = Shape::new(n).halo(1).order(Order::Kij);
    let t = Field::from_fn(shape, |_| rng.f64());
    let p = Field::from_fn(shape, |_| rng.f64() as f32);
    let m = Field::from_fn(shape, |_| rng.next() as i32);
    for (file, format) in [
        ("fields.nc", stencil_runtime::io::netcdf::Format::Classic),
        ("fields64.nc", stencil_runtime::io::netcdf::Format::Offset64),
    ] {
        let mut w = Writer::new(vec![
            Axis::regular("x", n[0], 5.0, 10.0, "m").axis("X").long_name("x distance"),
            Axis::regular("y", n[1], 5.0, 10.0, "m").axis("Y"),
            Axis::regular("z", n[2], -5.0, -10.0, "m").axis("Z"),
        ])
        .format(format);
        w.attribute("title", "stencil io check");
        w.field("t", &t, "K", "temperature").unwrap();
        w.field("p", &p, "Pa", "pressure").unwrap();
        w.field("mask", &m, "1", "mask").unwrap();
        w.write(out.join(file)).unwrap();
        for (var, bytes, dtype) in [
            ("t", c_order_bytes(&t, true), "f8"),
            ("p", c_order_bytes(&p, true), "f4"),
            ("mask", c_order_bytes(&m, true), "i4"),
        ] {
            std::fs::write(out.join(format!("{file}.{var}.raw")), bytes).unwrap();
            writeln!(manifest, "nc {file} {var} {dtype} {},{},{} {file}.{var}.raw", n[2], n[1], n[0]).unwrap();
        }
    }
    std::fs::write(out.join("manifest.txt"), manifest).unwrap();
    println!("wrote {}", out.display());
}
