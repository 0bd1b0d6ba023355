use stencil_runtime::prelude::*;

#[stencil_fn]
fn wrong(x: f64) -> f64 {
    x.frobnicate()
}

#[stencil]
fn apply(idx: Idx1, g: &Field1<f64>, out: &mut Field1<f64>) {
    out[idx] = wrong(g[idx]);
}

#[stencil]
fn apply_again(idx: Idx1, g: &Field1<f64>, out: &mut Field1<f64>) {
    out[idx] = wrong(g[idx]) + 1.0;
}

fn main() {}
