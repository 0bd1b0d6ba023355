use stencil_runtime::prelude::*;

// A named point (`let east = p.ix::<1>();`) indexes fields; it is not a number either.
#[stencil]
fn shifted(p: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {
    let east = p.ix::<1>();
    out[p] = f[east] + east;
}

fn main() {}
