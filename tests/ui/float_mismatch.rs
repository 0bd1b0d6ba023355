use stencil_runtime::prelude::*;

#[stencil]
fn step(idx: Idx3, dt: f64, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = f[idx] * dt;
}

fn main() {}
