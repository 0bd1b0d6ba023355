use stencil_runtime::prelude::*;

#[stencil]
fn push_east(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx.ix::<1, 0, 0>()] = f[idx];
}

fn main() {}
