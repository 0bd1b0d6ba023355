//! Files a person can look at: PNG pictures of a wavefield section and of a seismogram (a
//! diverging blue-white-red colormap, negative blue, positive red), the receiver traces as CSV,
//! and a 3D field as a legacy VTK file (binary `STRUCTURED_POINTS`) for ParaView.
//!
//! Every function returns a [`std::io::Error`] whose message starts with the path it was
//! writing.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use stencil_runtime::{Field2, Field3};

/// Pictures narrower than this many pixels are scaled up (nearest neighbour, by a whole factor).
pub const MIN_WIDTH: usize = 512;

/// The section's colour scale saturates at this percentile of `|u|` (symmetric about zero).
pub const SECTION_CLIP_PERCENTILE: f64 = 99.5;

/// The seismogram's colour scale saturates at this percentile of the gained `|u|`.
pub const SEISMOGRAM_CLIP_PERCENTILE: f64 = 98.0;

/// The exponent of the seismogram's time-power gain: sample `s` is multiplied by `(s + 1)^2`.
pub const SEISMOGRAM_GAIN_POWER: i32 = 2;

/// An error about `path` that says what went wrong.
fn error_at(path: &Path, kind: io::ErrorKind, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(kind, format!("{}: {what}", path.display()))
}

/// The same I/O error with the path in front of its message.
fn with_path(path: &Path) -> impl Fn(io::Error) -> io::Error + '_ {
    move |e| error_at(path, e.kind(), e)
}

/// The `p`-th percentile (0..=100) of `|v|` over the finite values (0 when there are none).
pub fn abs_percentile(values: impl IntoIterator<Item = f32>, p: f64) -> f32 {
    let mut abs: Vec<f32> = values.into_iter().filter(|v| v.is_finite()).map(f32::abs).collect();
    if abs.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0).clamp(0.0, 1.0) * (abs.len() - 1) as f64).round() as usize;
    *abs.select_nth_unstable_by(rank, f32::total_cmp).1
}

/// The diverging colormap (ColorBrewer's RdBu, reversed): `-1` dark blue, `0` white, `1` dark
/// red; values outside `[-1, 1]` saturate, NaN is black.
pub fn diverging(v: f32) -> [u8; 3] {
    const STOPS: [[f32; 3]; 5] =
        [[5.0, 48.0, 97.0], [67.0, 147.0, 195.0], [247.0, 247.0, 247.0], [214.0, 96.0, 77.0], [103.0, 0.0, 31.0]];
    if v.is_nan() {
        return [0, 0, 0];
    }
    let x = (v.clamp(-1.0, 1.0) + 1.0) * 2.0; // 0..=4 over the stops
    let i = (x.floor() as usize).min(3);
    let f = x - i as f32;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    [0, 1, 2].map(|c| (a[c] + f * (b[c] - a[c])).round() as u8)
}

/// A sequential colormap (five stops of viridis): `0` dark purple to `1` yellow; values outside
/// `[0, 1]` saturate, NaN is black. For fields with one sign (density, water depth).
pub fn sequential(v: f32) -> [u8; 3] {
    const STOPS: [[f32; 3]; 5] =
        [[68.0, 1.0, 84.0], [59.0, 82.0, 139.0], [33.0, 145.0, 140.0], [94.0, 201.0, 98.0], [253.0, 231.0, 37.0]];
    if v.is_nan() {
        return [0, 0, 0];
    }
    let x = v.clamp(0.0, 1.0) * 4.0;
    let i = (x.floor() as usize).min(3);
    let f = x - i as f32;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    [0, 1, 2].map(|c| (a[c] + f * (b[c] - a[c])).round() as u8)
}

/// Writes `values` (row-major, `width` per row, row 0 at the top) as a PNG with the
/// [`sequential`] colormap spanning `lo..=hi` (e.g. the field's min and max), scaled up to at
/// least [`MIN_WIDTH`] pixels across (nearest neighbour). For 2D fields and slices of 3D ones.
pub fn write_png_image(path: impl AsRef<Path>, values: &[f32], width: usize, lo: f32, hi: f32) -> io::Result<()> {
    let path = path.as_ref();
    if width == 0 || values.is_empty() || !values.len().is_multiple_of(width) {
        return Err(error_at(
            path,
            io::ErrorKind::InvalidInput,
            format!("{} values are not rows of {width}", values.len()),
        ));
    }
    let span = if hi > lo { hi - lo } else { 1.0 };
    let scaled: Vec<f32> = values.iter().map(|v| (v - lo) / span).collect();
    let k = upscale(width);
    write_rgb_png(path, &scaled, width, values.len() / width, 1.0, [k, k], sequential)
}

/// Writes the xy plane at interior index `z` of a host field as a PNG (x across, y down) with
/// the [`sequential`] colormap from the plane's min to its max; returns the min and the max.
pub fn write_png_xy(path: impl AsRef<Path>, field: &Field3<f64>, z: usize) -> io::Result<(f32, f32)> {
    let (view, [nx, ny, _]) = (field.interior_view(), field.shape().interior());
    let values: Vec<f32> =
        (0..ny).flat_map(|j| (0..nx).map(move |i| (i, j))).map(|(i, j)| view[[i, j, z]] as f32).collect();
    let lo = values.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    write_png_image(path, &values, nx, lo, hi)?;
    Ok((lo, hi))
}

/// Writes the interior of a 2D host field as a PNG (x across, y up) with the [`sequential`]
/// colormap from its min to its max; returns the min and the max.
pub fn write_png_field(path: impl AsRef<Path>, field: &Field2<f64>) -> io::Result<(f64, f64)> {
    let (view, [nx, ny]) = (field.interior_view(), field.shape().interior());
    let rows: Vec<f64> = (0..ny).rev().flat_map(|j| (0..nx).map(move |i| view[[i, j]])).collect();
    let lo = rows.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = rows.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let values: Vec<f32> = rows.iter().map(|&v| v as f32).collect();
    write_png_image(path, &values, nx, lo as f32, hi as f32)?;
    Ok((lo, hi))
}

/// Encodes a `width` x `height` picture of `values` (row-major, row 0 at the top) divided by
/// `clip` through `colour` as an 8-bit RGB PNG, each value repeated `scale[0]` times across and
/// `scale[1]` times down.
fn write_rgb_png(
    path: &Path,
    values: &[f32],
    width: usize,
    height: usize,
    clip: f32,
    scale: [usize; 2],
    colour: fn(f32) -> [u8; 3],
) -> io::Result<()> {
    let clip = if clip > 0.0 && clip.is_finite() { clip } else { 1.0 };
    let (w, h) = (width * scale[0], height * scale[1]);
    let mut rgb = Vec::with_capacity(3 * w * h);
    for row in values.chunks(width) {
        let line: Vec<u8> = row.iter().flat_map(|&v| colour(v / clip).repeat(scale[0])).collect();
        for _ in 0..scale[1] {
            rgb.extend_from_slice(&line);
        }
    }
    let too_big = |_| error_at(path, io::ErrorKind::InvalidInput, format!("a {w}x{h} picture is too large for a PNG"));
    let file = File::create(path).map_err(with_path(path))?;
    let mut encoder =
        png::Encoder::new(BufWriter::new(file), u32::try_from(w).map_err(too_big)?, u32::try_from(h).map_err(too_big)?);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let png_error = |e: png::EncodingError| match e {
        png::EncodingError::IoError(e) => with_path(path)(e),
        e => error_at(path, io::ErrorKind::Other, format!("PNG encoding failed: {e}")),
    };
    let mut writer = encoder.write_header().map_err(png_error)?;
    writer.write_image_data(&rgb).map_err(png_error)?;
    writer.finish().map_err(png_error)
}

/// The whole factor that makes `width` at least [`MIN_WIDTH`] pixels.
fn upscale(width: usize) -> usize {
    MIN_WIDTH.div_ceil(width.max(1)).max(1)
}

/// Writes the xz section of `field` at global `y` as a PNG: x across, z (depth) downwards,
/// leaving `crop` points off every side (e.g. the PML width, to show only the physical domain).
/// The colour scale is symmetric and saturates at the [`SECTION_CLIP_PERCENTILE`] of `|u|` over
/// the section, so the wavefront stands out even next to the source; small sections are scaled
/// up (nearest neighbour) to at least [`MIN_WIDTH`] pixels across, the same factor down.
pub fn write_png_slice(path: impl AsRef<Path>, field: &Field3<f32>, y: isize, crop: usize) -> io::Result<()> {
    let path = path.as_ref();
    let [nx, ny, nz] = field.shape().interior();
    if y < 0 || y >= ny as isize || 2 * crop >= nx || 2 * crop >= nz {
        return Err(error_at(
            path,
            io::ErrorKind::InvalidInput,
            format!("no xz section at y = {y} cropped by {crop} in a field of {nx}x{ny}x{nz} points"),
        ));
    }
    let (width, height) = (nx - 2 * crop, nz - 2 * crop);
    let mut values = Vec::with_capacity(width * height);
    for k in crop..nz - crop {
        for i in crop..nx - crop {
            values.push(field.get([i as isize, y, k as isize]).expect("a point of the interior"));
        }
    }
    let clip = abs_percentile(values.iter().copied(), SECTION_CLIP_PERCENTILE);
    let s = upscale(width);
    write_rgb_png(path, &values, width, height, clip, [s, s], diverging)
}

/// Writes a seismogram as a PNG: receiver `r` across, step `s` (time) downwards, one pixel per
/// step (`traces[s][r]`, as [`Outcome::traces`](crate::acoustic::Outcome) holds them), the
/// receivers scaled up across to at least [`MIN_WIDTH`] pixels.
///
/// **Gain.** The direct wave near the source is orders of magnitude stronger than anything
/// reflected, so each sample is multiplied by `(s + 1)^2` (the usual time-power gain `t²`, which
/// undoes the `1/t` spherical spreading with room to spare) and the colour scale saturates at the
/// [`SEISMOGRAM_CLIP_PERCENTILE`] of the gained `|u|`: the direct wave clips, and the reflections
/// arriving later keep a visible amplitude.
pub fn write_seismogram_png(path: impl AsRef<Path>, traces: &[Vec<f32>]) -> io::Result<()> {
    let path = path.as_ref();
    let width = traces.first().map_or(0, Vec::len);
    if width == 0 || traces.iter().any(|t| t.len() != width) {
        return Err(error_at(path, io::ErrorKind::InvalidInput, "the traces are empty or of unequal lengths"));
    }
    let values: Vec<f32> = traces
        .iter()
        .enumerate()
        .flat_map(|(s, row)| {
            let gain = ((s + 1) as f32).powi(SEISMOGRAM_GAIN_POWER);
            row.iter().map(move |v| v * gain)
        })
        .collect();
    let clip = abs_percentile(values.iter().copied(), SEISMOGRAM_CLIP_PERCENTILE);
    write_rgb_png(path, &values, width, traces.len(), clip, [upscale(width), 1], diverging)
}

/// Writes the traces as CSV: a header line (`time_s,r0,r1,...`), then one row per step `s`
/// (`traces[s]`): its time `(s + 1) · dt` in seconds, then the value at every receiver.
pub fn write_traces_csv(path: impl AsRef<Path>, traces: &[Vec<f32>], dt: f64) -> io::Result<()> {
    let path = path.as_ref();
    let receivers = traces.first().map_or(0, Vec::len);
    let mut out = BufWriter::new(File::create(path).map_err(with_path(path))?);
    let header: Vec<String> =
        std::iter::once("time_s".to_string()).chain((0..receivers).map(|r| format!("r{r}"))).collect();
    writeln!(out, "{}", header.join(",")).map_err(with_path(path))?;
    for (s, row) in traces.iter().enumerate() {
        write!(out, "{:e}", (s + 1) as f64 * dt).map_err(with_path(path))?;
        for v in row {
            write!(out, ",{v:e}").map_err(with_path(path))?;
        }
        writeln!(out).map_err(with_path(path))?;
    }
    out.flush().map_err(with_path(path))
}

/// Writes 3D fields of one shape as a legacy binary VTK file (`DATASET STRUCTURED_POINTS`, one
/// float `SCALARS` point array per `(name, field)`), read by ParaView as image data. The points
/// are the fields' interiors (halos left out), x fastest; global index `g` lies at
/// `origin + g · spacing` on every axis (z is the model's depth axis, pointing down).
pub fn write_vtk(
    path: impl AsRef<Path>,
    arrays: &[(&str, &Field3<f32>)],
    spacing: f64,
    origin: [f64; 3],
) -> io::Result<()> {
    let path = path.as_ref();
    let Some((_, first)) = arrays.first() else {
        return Err(error_at(path, io::ErrorKind::InvalidInput, "no arrays to write"));
    };
    let n = first.shape().interior();
    if let Some((name, _)) = arrays.iter().find(|(_, f)| f.shape().interior() != n) {
        return Err(error_at(
            path,
            io::ErrorKind::InvalidInput,
            format!("array {name:?} is not {n:?} points like the first"),
        ));
    }
    let file = File::create(path).map_err(with_path(path))?;
    let mut out = BufWriter::new(file);
    let [ox, oy, oz] = origin.map(|o| o as f32);
    let s = spacing as f32;
    let header = format!(
        "# vtk DataFile Version 3.0\nstencil acoustic3d\nBINARY\nDATASET STRUCTURED_POINTS\nDIMENSIONS {} {} {}\n\
         ORIGIN {ox:?} {oy:?} {oz:?}\nSPACING {s:?} {s:?} {s:?}\nPOINT_DATA {}\n",
        n[0],
        n[1],
        n[2],
        n.iter().product::<usize>()
    );
    out.write_all(header.as_bytes()).map_err(with_path(path))?;
    for (name, field) in arrays {
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(error_at(
                path,
                io::ErrorKind::InvalidInput,
                format!("array name {name:?} is empty or has spaces"),
            ));
        }
        write!(out, "SCALARS {name} float 1\nLOOKUP_TABLE default\n").map_err(with_path(path))?;
        // Binary legacy VTK is big-endian.
        for k in 0..n[2] as isize {
            for j in 0..n[1] as isize {
                for i in 0..n[0] as isize {
                    let v = field.get([i, j, k]).expect("a point of the interior");
                    out.write_all(&v.to_be_bytes()).map_err(with_path(path))?;
                }
            }
        }
        writeln!(out).map_err(with_path(path))?;
    }
    out.flush().map_err(with_path(path))
}

/// acoustic3d's output options (`--out`, `--snapshot`, `--no-vtk`): flattened into its options.
#[derive(clap::Args, Debug, Clone)]
pub struct Acoustic3dOutput {
    /// Directory for the output files (created if missing).
    #[arg(long, default_value = "acoustic3d-out")]
    pub out: std::path::PathBuf,
    /// Step whose wavefield goes into wavefield_xz.png and wavefield.vtk (default: 3/5 of
    /// --steps, when the direct, reflected and transmitted waves are all in the domain).
    #[arg(long)]
    pub snapshot: Option<usize>,
    /// Skip the 3D wavefield (wavefield.vtk, the largest file).
    #[arg(long)]
    pub no_vtk: bool,
}

impl Acoustic3dOutput {
    /// The snapshot step of a run of `steps` steps, checked, once the output folder is made.
    pub fn prepare(&self, steps: usize) -> Result<usize, Box<dyn std::error::Error>> {
        let snapshot = self.snapshot.unwrap_or((3 * steps).div_ceil(5).max(1));
        if !(1..=steps).contains(&snapshot) {
            return Err(format!("--snapshot {snapshot} is not one of the steps 1..={steps}").into());
        }
        std::fs::create_dir_all(&self.out).map_err(|e| error_at(&self.out, e.kind(), e))?;
        Ok(snapshot)
    }

    /// Writes the files of a run of `model` ([`Acoustic3dOutput::write_files`]) and lists them.
    pub fn write(
        &self,
        model: &crate::acoustic::Model,
        traces: &[Vec<f32>],
        wavefield: Option<&Field3<f32>>,
        snapshot: usize,
    ) -> io::Result<()> {
        println!("wrote:");
        for (path, what) in self.write_files(model, traces, wavefield, snapshot)? {
            println!("  {:<32} {what}", path.display());
        }
        Ok(())
    }

    /// Writes the seismogram and the traces (`traces[s][r]`), and, given the wavefield of step
    /// `snapshot`, its xz section through the source and (without `--no-vtk`) the 3D wavefield
    /// with the velocity. Returns each path with a line saying what it holds.
    pub fn write_files(
        &self,
        model: &crate::acoustic::Model,
        traces: &[Vec<f32>],
        wavefield: Option<&Field3<f32>>,
        snapshot: usize,
    ) -> io::Result<Vec<(std::path::PathBuf, String)>> {
        let (dir, mut written) = (&self.out, Vec::new());
        let receivers = traces.first().map_or(0, Vec::len);
        let t = snapshot as f64 * model.dt;

        let path = dir.join("seismogram.png");
        write_seismogram_png(&path, traces)?;
        written.push((path, format!("{receivers} receivers (x) across, {} steps down, t^2 gain", traces.len())));

        let path = dir.join("traces.csv");
        write_traces_csv(&path, traces, model.dt)?;
        written.push((path, format!("time_s, then u at the {receivers} receivers; one row per step")));

        let Some(wavefield) = wavefield else { return Ok(written) };
        let path = dir.join("wavefield_xz.png");
        let y = (model.pml + model.source[1]) as isize;
        write_png_slice(&path, wavefield, y, model.pml)?;
        written
            .push((path, format!("u at step {snapshot} (t = {t:.3} s), xz section through the source, PML cut off")));

        if !self.no_vtk {
            let path = dir.join("wavefield.vtk");
            let velocity = Field3::from_fn(*wavefield.shape(), |g| model.velocity(g) as f32);
            let origin = [-(model.pml as f64) * model.h; 3];
            write_vtk(&path, &[("u", wavefield), ("velocity", &velocity)], model.h, origin)?;
            written.push((
                path,
                format!("u at step {snapshot} and velocity, PML included (physical domain from 0 m, z down)"),
            ));
        }
        Ok(written)
    }
}

/// Writes a curve as a PNG (512 × 256 pixels, black on white): `values[k]` at `k` across from
/// left to right, on a logarithmic vertical scale from the smallest value (bottom) to the
/// largest (top), joined by straight lines. For a misfit per iteration. Values that are not
/// finite and positive are an error.
pub fn write_png_curve(path: impl AsRef<Path>, values: &[f64]) -> io::Result<()> {
    let path = path.as_ref();
    if values.len() < 2 || values.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return Err(error_at(
            path,
            io::ErrorKind::InvalidInput,
            format!("a curve of {values:?}: give 2 or more values > 0"),
        ));
    }
    let (w, h, margin) = (512usize, 256usize, 8usize);
    let logs: Vec<f64> = values.iter().map(|v| v.log10()).collect();
    let lo = logs.iter().copied().fold(f64::INFINITY, f64::min);
    let span = (logs.iter().copied().fold(f64::NEG_INFINITY, f64::max) - lo).max(1e-12);
    let row_of = |l: f64| margin as f64 + (1.0 - (l - lo) / span) * (h - 2 * margin - 1) as f64;
    let mut pixels = vec![0.0f32; w * h];
    for x in margin..w - margin {
        let t = (x - margin) as f64 / (w - 2 * margin - 1) as f64 * (values.len() - 1) as f64;
        let k = (t.floor() as usize).min(values.len() - 2);
        let y = row_of(logs[k] + (t - k as f64) * (logs[k + 1] - logs[k])).round() as usize;
        for yy in y.saturating_sub(1)..=(y + 1).min(h - 1) {
            pixels[yy * w + x] = 1.0;
        }
    }
    fn ink(v: f32) -> [u8; 3] {
        if v > 0.5 {
            [0; 3]
        } else {
            [255; 3]
        }
    }
    write_rgb_png(path, &pixels, w, h, 1.0, [1, 1], ink)
}

/// Writes `values` (row-major, `width` per row, row 0 at the top) as a PNG with the
/// [`diverging`] colormap over `[-1, 1]` (scale them first), scaled up to at least
/// [`MIN_WIDTH`] pixels across. For signed fields: a gradient, a model update.
pub fn write_png_signed(path: impl AsRef<Path>, values: &[f32], width: usize) -> io::Result<()> {
    let path = path.as_ref();
    if width == 0 || values.is_empty() || !values.len().is_multiple_of(width) {
        let message = format!("{} values are not rows of {width}", values.len());
        return Err(error_at(path, io::ErrorKind::InvalidInput, message));
    }
    let k = upscale(width);
    write_rgb_png(path, values, width, values.len() / width, 1.0, [k, k], diverging)
}
