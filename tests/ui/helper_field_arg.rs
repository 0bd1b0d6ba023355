use stencil_runtime::prelude::*;

#[stencil_fn]
fn twice(x: f64) -> f64 {
    2.0 * x
}

#[stencil]
fn apply(idx: Idx1, f: &Field1<f64>, out: &mut Field1<f64>) {
    out[idx] = twice(f);
}

fn main() {}
