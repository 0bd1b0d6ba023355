use stencil_runtime::prelude::*;

// Offsets are compile-time literals, not parameters.
#[stencil]
fn shift(idx: Idx3, k: i32, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = f[idx.ix::<k, 0, 0>()];
}

fn main() {}
