use stencil_runtime::prelude::*;

// `+=` on a neighbour of a written field: a write at an offset (and a racy read).
#[stencil]
fn scatter(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = f[idx];
    out[idx.ix::<0, 0, -1>()] += f[idx];
}

fn main() {}
