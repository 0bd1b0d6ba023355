use stencil_runtime::prelude::*;

#[stencil]
fn pair(i: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {
    let (a, i) = (f[i], 1.0f32);
    out[i] = a * i;
}

fn main() {}
