use stencil_runtime::prelude::*;

#[stencil]
fn copy(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    let x = unsafe { f[idx] };
    out[idx] = x;
}

fn main() {}
