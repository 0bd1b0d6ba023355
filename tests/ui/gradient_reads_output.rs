use stencil_runtime::prelude::*;

// The derivative with respect to `c` is the old value of `out`, whose place the gradient gives
// to its cotangent `out_bar`.
#[stencil(gradient(c))]
fn grow(idx: Idx3, c: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = out[idx] * c[idx];
}

fn main() {}
