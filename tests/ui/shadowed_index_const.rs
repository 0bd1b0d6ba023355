use stencil_runtime::prelude::*;

#[stencil]
#[allow(non_upper_case_globals)]
fn constant(p: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {
    const p: usize = 1;
    out[p] = f[p];
}

fn main() {}
