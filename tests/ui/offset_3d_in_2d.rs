use stencil_runtime::prelude::*;

#[stencil]
fn east(idx: Idx2, f: &Field2<f32>, out: &mut Field2<f32>) {
    out[idx] = f[idx.ix::<1, 0, 0>()];
}

fn main() {}
