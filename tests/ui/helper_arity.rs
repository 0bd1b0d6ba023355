use stencil_runtime::prelude::*;

#[stencil_fn]
fn blend(a: f64, b: f64, w: f64) -> f64 {
    (1.0 - w) * a + w * b
}

#[stencil]
fn apply(idx: Idx1, f: &Field1<f64>, out: &mut Field1<f64>) {
    out[idx] = blend(f[idx], f[idx.ix::<1>()]);
}

fn main() {}
