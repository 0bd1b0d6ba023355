use stencil_runtime::prelude::*;

fn foo(x: f32) -> f32 {
    x * 2.0
}

#[stencil]
fn apply(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    let x = f[idx];
    out[idx] = foo(x);
}

fn main() {
    let _ = foo(1.0);
}
