use stencil_runtime::prelude::*;

#[stencil]
fn clamp_in_place(idx: Idx3, lo: f32, f: &Field3<f32>, out: &mut Field3<f32>) {
    f[idx] = f[idx].max(lo);
    out[idx] = f[idx];
}

fn main() {}
