use stencil_runtime::prelude::*;

#[stencil]
fn defined_inside(idx: Idx1, a: &Field1<f64>, out: &mut Field1<f64>) {
    let f = |p: Idx1| {
        let g = |r: Idx1| a[r];
        g(p)
    };
    out[idx] = f(idx);
}

fn main() {}
