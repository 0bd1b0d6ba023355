//! The inputs of acoustic3d from files. Velocity models (`--velocity FILE`): a `.npy` array indexed
//! `v[i, j, k]` (x, y, z; z is depth) or a NetCDF variable `v(z, y, x)`, in m/s, `float` or
//! `double`, one value per point of the physical grid (the PML takes the nearest physical
//! point's velocity). Receiver positions (`--receivers FILE`): lines `x,y,z` in metres.

use std::path::Path;

use stencil_runtime::io::netcdf::Dataset;
use stencil_runtime::io::{npy, IoError};
use stencil_runtime::{Field3, Shape3};

/// The velocities of the file at `path` as a field of the physical grid (no halo): a `.npy`
/// file (by its extension), else a NetCDF classic file, whose variable `var` is read (default:
/// its only 3D variable).
pub fn read(path: &Path, var: Option<&str>) -> Result<Field3<f64>, IoError> {
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy")) {
        return match npy::header(path)?.descr.as_str() {
            "<f4" => Ok(widen(&npy::read::<f32, 3>(path, 0)?)),
            _ => npy::read::<f64, 3>(path, 0),
        };
    }
    let ds = Dataset::open(path)?;
    let name = match var {
        Some(v) => v.to_string(),
        None => {
            let three: Vec<&str> = ds.variables.iter().filter(|v| v.dims.len() == 3).map(|v| v.name.as_str()).collect();
            match three.as_slice() {
                [one] => one.to_string(),
                _ => {
                    return Err(IoError::Missing {
                        path: path.to_path_buf(),
                        name: "a single 3D variable (give --velocity-var)".into(),
                        available: three.iter().map(|s| s.to_string()).collect(),
                    })
                }
            }
        }
    };
    match ds.variable(&name)?.type_name().as_str() {
        "float" => Ok(widen(&ds.read::<f32, 3>(&name, 0)?)),
        _ => ds.read::<f64, 3>(&name, 0),
    }
}

/// An `f32` field as `f64`.
fn widen(f: &Field3<f32>) -> Field3<f64> {
    Field3::from_fn(Shape3::new(f.shape().interior()), |g| f.get(g).expect("interior") as f64)
}

/// A point `x,y,z` (metres).
pub fn parse_xyz(text: &str) -> Result<[f64; 3], String> {
    let values: Vec<f64> = text
        .split(',')
        .map(|v| v.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("`{text}` is not x,y,z in metres ({e})"))?;
    <[f64; 3]>::try_from(values).map_err(|v| format!("`{text}` has {} values; give x,y,z in metres", v.len()))
}

/// Receiver positions from a text file: one `x,y,z` (metres) per line; blank lines and `#`
/// comments are skipped. A line that is not three numbers is an error naming the file and line.
pub fn read_positions(path: &std::path::Path) -> Result<Vec<[f64; 3]>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("--receivers {}: {e}", path.display()))?;
    let mut positions = Vec::new();
    for (line, content) in text.lines().enumerate() {
        let content = content.split('#').next().unwrap_or("").trim();
        if !content.is_empty() {
            positions
                .push(parse_xyz(content).map_err(|e| format!("--receivers {}:{}: {e}", path.display(), line + 1))?);
        }
    }
    Ok(positions)
}
