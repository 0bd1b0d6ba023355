//! The stencils the benchmarks time (the 7-point diffusion and 25-point acoustic update,
//! from the canonical test set in `stencil_tests::canonical`) and small timing helpers.

/// 7-point diffusion (ASUCA's `Diffusion3d`): 8 bytes per point in f32. The canonical test
/// stencil, so the benchmarks time exactly what the tests check.
pub use stencil_tests::canonical::Diffusion as Diffusion7;

/// The 8th-order (radius 4, 25-point star) acoustic update
/// `u_next = 2u - u_prev + c * v2 * lap(u)`: reads u, u_prev, v2, writes u_next (16 B/point).
/// The canonical test stencil `star25`.
pub use stencil_tests::canonical::Star25 as Acoustic25;

/// [`Diffusion7`] and [`Acoustic25`] with their products fused (`#[stencil(fma)]`), in f32 and
/// f64: what the C peers' compilers do on their own (`-ffp-contract=fast`, `-ffast-math`), here
/// the same on the CPU and the GPU.
pub use stencil_tests::canonical::{
    Diffusion7F64Fma, DiffusionFma as Diffusion7Fma, Star25F64Fma as Acoustic25F64Fma, Star25Fma as Acoustic25Fma,
};

/// The median time of `runs` calls of `f`, in seconds, after one warm-up call.
pub fn time(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    median(
        (0..runs)
            .map(|_| {
                let t = std::time::Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

/// The device-to-device copy bandwidth of `gpu` over `bytes` (GB/s, read + written), measured
/// and printed with the device's name: the reference the GPU benchmarks give their % of copy
/// against.
#[cfg(feature = "cuda")]
pub fn copy_bandwidth(gpu: &stencil_runtime::cuda::Gpu, bytes: usize) -> Result<f64, stencil_runtime::LaunchError> {
    let copy = gpu.copy_bandwidth_gbs(bytes, 20)?;
    let (major, minor) = gpu.compute_capability();
    println!(
        "device: {} (sm_{major}{minor}); device-to-device copy of {} MiB: {copy:.0} GB/s (read + written)",
        gpu.name(),
        bytes >> 20
    );
    Ok(copy)
}

/// The median of a sample.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// 7-point diffusion in f64 (the canonical `diffusion7_f64`).
pub use stencil_tests::canonical::Diffusion7F64;
/// The 25-point acoustic update in f64 (the canonical `star25_f64`).
pub use stencil_tests::canonical::Star25F64 as Acoustic25F64;

pub mod euler_written_out;

use stencil_runtime::prelude::*;

/// 2D stencils of the side-by-side benchmark: 5-point diffusion and the 2D radius-4 (17-point)
/// acoustic update, in f32 and f64.
macro_rules! stencils_2d {
    ($diff:ident, $star:ident, $t:ident $(, $opt:ident)?) => {
        /// 5-point diffusion `f_new = cc f + a (4 neighbours)`: 8 (f32) or 16 (f64) bytes per point.
        #[stencil($($opt)?)]
        pub fn $diff(idx: Idx2, a: $t, cc: $t, f: &Field2<$t>, f_new: &mut Field2<$t>) {
            f_new[idx] = cc * f[idx]
                + a * f[idx.ix::<1, 0>()]
                + a * f[idx.ix::<-1, 0>()]
                + a * f[idx.ix::<0, 1>()]
                + a * f[idx.ix::<0, -1>()];
        }

        /// The 8th-order 2D acoustic update `u_next = 2u - u_prev + c v2 lap(u)` (17-point star).
        #[stencil($($opt)?)]
        pub fn $star(idx: Idx2, c: $t, u: &Field2<$t>, u_prev: &Field2<$t>, v2: &Field2<$t>, u_next: &mut Field2<$t>) {
            let c0 = -205.0 / 72.0;
            let c1 = 8.0 / 5.0;
            let c2 = -1.0 / 5.0;
            let c3 = 8.0 / 315.0;
            let c4 = -1.0 / 560.0;
            let lap = 2.0 * c0 * u[idx]
                + c1 * (u[idx.ix::<1, 0>()] + u[idx.ix::<-1, 0>()] + u[idx.ix::<0, 1>()] + u[idx.ix::<0, -1>()])
                + c2 * (u[idx.ix::<2, 0>()] + u[idx.ix::<-2, 0>()] + u[idx.ix::<0, 2>()] + u[idx.ix::<0, -2>()])
                + c3 * (u[idx.ix::<3, 0>()] + u[idx.ix::<-3, 0>()] + u[idx.ix::<0, 3>()] + u[idx.ix::<0, -3>()])
                + c4 * (u[idx.ix::<4, 0>()] + u[idx.ix::<-4, 0>()] + u[idx.ix::<0, 4>()] + u[idx.ix::<0, -4>()]);
            u_next[idx] = 2.0 * u[idx] - u_prev[idx] + c * v2[idx] * lap;
        }
    };
}
stencils_2d!(diffusion5, acoustic17, f32);
stencils_2d!(diffusion5_f64, acoustic17_f64, f64);
stencils_2d!(diffusion5_fma, acoustic17_fma, f32, fma);
stencils_2d!(diffusion5_f64_fma, acoustic17_f64_fma, f64, fma);
