//! The stencils the benchmarks time (the 7-point diffusion and 25-point acoustic update,
//! from the canonical test set in `stencil_tests::canonical`) and small timing helpers.

/// 7-point diffusion (ASUCA's `Diffusion3d`): 8 bytes per point in f32. The canonical test
/// stencil, so the benchmarks time exactly what the tests check.
pub use stencil_tests::canonical::Diffusion as Diffusion7;

/// The 8th-order (radius 4, 25-point star) acoustic update
/// `u_next = 2u - u_prev + c * v2 * lap(u)`: reads u, u_prev, v2, writes u_next (16 B/point).
/// The canonical test stencil `star25`.
pub use stencil_tests::canonical::Star25 as Acoustic25;

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
