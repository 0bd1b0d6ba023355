// Everything here is accepted: constants, math through paths and methods, bool and u32 scalars,
// `else if` values, nested blocks, shadowing, `ix()` without offsets, negative offsets in braces.
use stencil_runtime::prelude::*;

#[stencil]
fn mixed(idx: Idx2, on: bool, n: u32, f: &Field2<f64>, out: &mut Field2<f64>) {
    const HALF: f64 = 0.5;
    let x = f[idx.ix()];
    let x = x * HALF + f64::max(f[idx.ix::<{ -1 }, 0>()], 0.0);
    let y = if !on {
        0.0
    } else if n > 3 {
        x.mul_add(2.0, std::f64::consts::PI)
    } else {
        let t = { x.abs().sqrt() };
        t.clamp(0.0, 1.0)
    };
    out[idx] = y + (n as f64).powi(2) + f64::EPSILON;
}

fn main() {
    let shape = Shape2::new([5, 4]).halo(1);
    let f = Field2::from_fn(shape, |[i, j]| (i * 10 + j) as f64);
    let mut out = Field2::zeros(shape);
    Loop2D::interior(&shape).run(Mixed, (true, 5, &f, &mut out)).unwrap();
    let x = 12.0 * 0.5 + 2.0;
    assert_eq!(out.get([1, 2]), Some(x * 2.0 + std::f64::consts::PI + 25.0 + f64::EPSILON));
}
