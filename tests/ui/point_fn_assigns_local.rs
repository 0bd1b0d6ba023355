use stencil_runtime::prelude::*;

#[stencil]
fn assigns(idx: Idx2, a: &Field2<f32>, out: &mut Field2<f32>) {
    let mut s = 0.0;
    let f = |p: Idx2| {
        s = 1.0;
        a[p]
    };
    out[idx] = f(idx) + s;
}

fn main() {}
