use stencil_runtime::prelude::*;

// A loop over a runtime bound is no constant loop: its variable is no offset.
#[stencil]
fn smear(idx: Idx1, n: i32, f: &Field1<f32>, out: &mut Field1<f32>) {
    let mut s = 0.0;
    let r = n - 1;
    s += f[idx.ix(r)];
    out[idx] = s;
}

fn main() {}
