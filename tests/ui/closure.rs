use stencil_runtime::prelude::*;

#[stencil]
fn square(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    let sq = |x: f32| x * x;
    out[idx] = sq(f[idx]);
}

fn main() {}
