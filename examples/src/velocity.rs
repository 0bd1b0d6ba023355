//! The inputs of acoustic3d from files. Velocity models (`--velocity FILE`): a `.npy` array indexed
//! `v[i, j, k]` (x, y, z; z is depth) or a NetCDF variable `v(z, y, x)`, in m/s, `float` or
//! `double`, one value per point of the physical grid (the PML takes the nearest physical
//! point's velocity). Receiver positions (`--receivers FILE`): lines `x,y,z` in metres.

use std::path::{Path, PathBuf};

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

/// A velocity model given point by point (m/s) on the physical grid (a field of its interior,
/// e.g. read by [`read`]), shared between clones of a model.
#[derive(Clone)]
pub struct VelocityGrid(pub std::sync::Arc<Field3<f64>>);

impl PartialEq for VelocityGrid {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0) || self.0.to_array() == other.0.to_array()
    }
}

impl std::fmt::Debug for VelocityGrid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VelocityGrid({:?})", self.0.shape().interior())
    }
}

impl VelocityGrid {
    /// The interior's values.
    pub fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.0.interior_view().into_iter().copied()
    }

    /// Refuses a grid of another extent than the physical grid `n`, or with a velocity that is
    /// not a number > 0 (the message says what to change).
    pub fn check(&self, n: [usize; 3]) -> Result<(), String> {
        let found = self.0.shape().interior();
        if found != n {
            return Err(format!(
                "the velocity grid has {found:?} points, but the physical grid is {n:?}: give one velocity per point"
            ));
        }
        match self.values().find(|v| !(v.is_finite() && *v > 0.0)) {
            Some(v) => Err(format!("the velocity grid holds {v}: every velocity must be a number > 0")),
            None => Ok(()),
        }
    }
}

/// acoustic3d's inputs from files and positions (`--velocity`, `--velocity-var`, `--source-at`,
/// `--receivers`): flattened into its options.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct InputArgs {
    /// Read the velocity model (m/s, one value per physical point) from this file instead of the
    /// two layers: a .npy array v[i, j, k] (x, y, z; z down) or a NetCDF variable v(z, y, x);
    /// the physical grid is the array's shape (--size is ignored), the spacing 10 m.
    #[arg(long, value_name = "FILE")]
    pub velocity: Option<PathBuf>,
    /// The NetCDF variable of --velocity (default: the file's only 3D variable).
    #[arg(long, value_name = "NAME")]
    pub velocity_var: Option<String>,
    /// The source at any point: x,y,z in metres from the first physical point (z down),
    /// injected into its cell's eight nodes with trilinear weights (default: a grid node near
    /// the surface, mid x and y).
    #[arg(long, value_name = "X,Y,Z", value_parser = parse_xyz)]
    pub source_at: Option<[f64; 3]>,
    /// Receivers at any points: a text file of lines `x,y,z` in metres (`#` starts a comment),
    /// each sampling u by trilinear interpolation (default: a line of receivers along x on the
    /// grid nodes just below the source).
    #[arg(long, value_name = "FILE")]
    pub receivers: Option<PathBuf>,
}

impl InputArgs {
    /// Gives `model` the velocity grid (printing what was read), the source position and the
    /// receivers the options name.
    pub fn apply(&self, model: &mut crate::acoustic::Model) -> Result<(), Box<dyn std::error::Error>> {
        if let Some(path) = &self.velocity {
            let grid = read(path, self.velocity_var.as_deref())?;
            let n = grid.shape().interior();
            // Source and receivers where the layered model puts them on a grid of this size.
            (model.n, model.source, model.receiver_depth) = (n, [n[0] / 2, n[1] / 2, n[2] / 16], n[2] / 32);
            model.velocity_grid = Some(VelocityGrid(std::sync::Arc::new(grid)));
            let ([nx, ny, nz], lo, hi) = (n, model.v_min(), model.v_max());
            println!("velocity model: {} ({nx}x{ny}x{nz} points, {lo:.0} to {hi:.0} m/s)", path.display());
        }
        if let Some(p) = self.source_at {
            model.source_position = Some(p);
            // The sections go through the source's nearest node.
            model.source = std::array::from_fn(|a| ((p[a] / model.h).round().max(0.0) as usize).min(model.n[a] - 1));
        }
        if let Some(path) = &self.receivers {
            model.receiver_positions = Some(read_positions(path)?);
        }
        Ok(())
    }
}
