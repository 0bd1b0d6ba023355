use stencil_runtime::prelude::*;

#[stencil]
fn writes(idx: Idx2, u: &Field2<f32>, out: &mut Field2<f32>) {
    let f = |p: Idx2| {
        out[p] = u[p];
        u[p]
    };
    out[idx] = f(idx.ix::<1, 0>());
}

fn main() {}
