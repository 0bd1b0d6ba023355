//! CPU benchmark: the generated loop nest against a hand-written Rust triple loop with the same
//! rayon split (bands of j-rows in parallel, each swept along k, rows along i inside), and against a STREAM-style triad
//! measured in the same run, for 7-point diffusion and the 25-point acoustic update.
//!
//! `cpu_bench [n] [runs]` (defaults 256 and 7): medians over `runs` timed sweeps after a warm-up.
//! Effective bandwidth counts the minimal bytes (each field read once, each output written once):
//! 8 B/point for diffusion, 16 B/point for the acoustic update; the triad counts 12 B/element.

use rayon::prelude::*;
use stencil_bench::{time, Acoustic25, Diffusion7};
use stencil_runtime::prelude::*;

/// STREAM triad `a = b + s * c` over three arrays of `len` f32, parallel in chunks.
fn triad_gbs(len: usize, runs: usize) -> f64 {
    let b = vec![1.0f32; len];
    let c = vec![2.0f32; len];
    let mut a = vec![0.0f32; len];
    let s = time(runs, || {
        a.par_chunks_mut(1 << 16).zip(b.par_chunks(1 << 16)).zip(c.par_chunks(1 << 16)).for_each(|((a, b), c)| {
            for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
                *a = b + 0.5 * c;
            }
        })
    });
    std::hint::black_box(&a);
    12.0 * len as f64 / s / 1e9
}

/// The runtime's rayon split, written out by hand: tasks own bands of up to 16 j-rows and sweep k.
fn for_each_band_row(ny: usize, nz: usize, row: impl Fn(usize, usize) + Sync) {
    let band = ny.div_ceil(4 * rayon::current_num_threads()).clamp(1, 16);
    (0..ny.div_ceil(band)).into_par_iter().for_each(|b| {
        for k in 0..nz {
            for j in b * band..ny.min((b + 1) * band) {
                row(j, k);
            }
        }
    });
}

/// Hand-written 7-point diffusion: the same arithmetic, order and rayon split as the nest.
fn hand_diffusion(shape: &Shape3, c: [f32; 7], f: &[f32], out: &mut [f32]) {
    let [nx, ny, nz] = shape.interior();
    let [_, sy, sz] = shape.strides();
    let base = shape.offset([1, 1, 1]);
    let out_ptr = out.as_mut_ptr() as usize;
    for_each_band_row(ny, nz, |j, k| {
        let row = base + k * sz + j * sy;
        // SAFETY: each (j, k) row is written by one task only.
        let o = unsafe { std::slice::from_raw_parts_mut((out_ptr as *mut f32).add(row), nx) };
        let f0 = &f[row..row + nx];
        let (fe, fw) = (&f[row + 1..row + 1 + nx], &f[row - 1..row - 1 + nx]);
        let (fn_, fs) = (&f[row + sy..row + sy + nx], &f[row - sy..row - sy + nx]);
        let (ft, fb) = (&f[row + sz..row + sz + nx], &f[row - sz..row - sz + nx]);
        for i in 0..nx {
            o[i] =
                c[6] * f0[i] + c[0] * fe[i] + c[1] * fw[i] + c[2] * fn_[i] + c[3] * fs[i] + c[4] * ft[i] + c[5] * fb[i];
        }
    });
}

/// Hand-written 25-point acoustic update (the canonical `star25`), same arithmetic order as the
/// stencil.
fn hand_acoustic(shape: &Shape3, c: f32, u: &[f32], up: &[f32], v2: &[f32], out: &mut [f32]) {
    let [nx, ny, nz] = shape.interior();
    let [_, sy, sz] = shape.strides();
    let base = shape.offset([4, 4, 4]);
    let out_ptr = out.as_mut_ptr() as usize;
    for_each_band_row(ny, nz, |j, k| {
        let row = base + k * sz + j * sy;
        // SAFETY: each (j, k) row is written by one task only.
        let o = unsafe { std::slice::from_raw_parts_mut((out_ptr as *mut f32).add(row), nx) };
        let r = |off: isize| &u[(row as isize + off) as usize..][..nx];
        let (sy, sz) = (sy as isize, sz as isize);
        let (c0, upr, v) = (r(0), &up[row..row + nx], &v2[row..row + nx]);
        let ring = |d: isize| [r(d), r(-d), r(d * sy), r(-d * sy), r(d * sz), r(-d * sz)];
        let (a1, a2, a3, a4) = (ring(1), ring(2), ring(3), ring(4));
        let (k0, k1, k2, k3, k4) = (-205.0f32 / 72.0, 8.0f32 / 5.0, -1.0f32 / 5.0, 8.0f32 / 315.0, -1.0f32 / 560.0);
        for i in 0..nx {
            let s = |a: &[&[f32]; 6]| a[0][i] + a[1][i] + a[2][i] + a[3][i] + a[4][i] + a[5][i];
            let lap = 3.0 * k0 * c0[i] + k1 * s(&a1) + k2 * s(&a2) + k3 * s(&a3) + k4 * s(&a4);
            o[i] = 2.0 * c0[i] - upr[i] + c * v[i] * lap;
        }
    });
}

/// The command line.
#[derive(clap::Parser)]
#[command(
    about = "The generated CPU nest against a hand-written loop and a STREAM triad (7-point diffusion, 25-point acoustic update)"
)]
struct Args {
    /// Points per axis of the cubic grid.
    #[arg(default_value_t = 256)]
    n: usize,
    /// Timed sweeps per case (the median is reported).
    #[arg(default_value_t = 7)]
    runs: usize,
}

fn main() {
    let Args { n, runs } = <Args as clap::Parser>::parse();
    let points = (n * n * n) as f64;
    println!("CPU benchmark: {n}^3 f32, {} threads, median of {runs} sweeps", rayon::current_num_threads());
    let triad = triad_gbs(n * n * n * 2, runs);

    let s1 = Shape3::new([n, n, n]).halo(1);
    let f = Field3::from_fn(s1, |[i, j, k]| ((i + 2 * j + 3 * k).rem_euclid(17)) as f32 * 0.1 + 1.0);
    let mut g = Field3::zeros(s1);
    let mut h = Field3::zeros(s1);
    let c = [0.1f32, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4];
    let r1 = Loop3D::interior(&s1);
    let gen7 =
        time(runs, || r1.run(Diffusion7, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &f, &mut g)).expect("launch"));
    let hand7 = time(runs, || hand_diffusion(&s1, c, f.as_slice(), h.as_mut_slice()));
    assert_eq!(
        g.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        h.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "nest and hand loop disagree"
    );
    drop((f, g, h));

    let s4 = Shape3::new([n, n, n]).halo(4);
    let u = Field3::from_fn(s4, |[i, j, k]| ((i + j + k).rem_euclid(13)) as f32 * 0.01 + 1.0);
    let up = Field3::from_fn(s4, |[i, j, k]| ((i * j + k).rem_euclid(7)) as f32 * 0.01 + 1.0);
    let v2 = Field3::filled(s4, 0.25f32);
    let mut g = Field3::zeros(s4);
    let mut h = Field3::zeros(s4);
    let r4 = Loop3D::interior(&s4);
    let gen25 = time(runs, || r4.run(Acoustic25, (0.1, &u, &up, &v2, &mut g)).expect("launch"));
    let hand25 = time(runs, || hand_acoustic(&s4, 0.1, u.as_slice(), up.as_slice(), v2.as_slice(), h.as_mut_slice()));
    assert_eq!(
        g.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        h.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "nest and hand loop disagree"
    );

    println!("triad: {triad:.1} GB/s\n");
    println!("| stencil | version | ms/sweep | GPts/s | effective GB/s | vs hand loop | % of triad |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (name, bytes, gen, hand) in [("diffusion7", 8.0, gen7, hand7), ("acoustic25", 16.0, gen25, hand25)] {
        for (version, t) in [("generated", gen), ("hand-written", hand)] {
            let gpts = points / t / 1e9;
            println!(
                "| {name} | {version} | {:.1} | {gpts:.3} | {:.1} | {:.2}x | {:.0}% |",
                t * 1e3,
                gpts * bytes,
                hand / t,
                100.0 * gpts * bytes / triad
            );
        }
    }
}
