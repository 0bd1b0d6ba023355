// A body may end in an assignment without a semicolon: its value is `()`, as in any Rust
// function, so it is not a returned value.
use stencil_runtime::prelude::*;

#[stencil]
fn double(idx: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {
    out[idx] = f[idx] * 2.0
}

#[stencil]
fn add_to(idx: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {
    out[idx] += f[idx]
}

fn main() {
    let shape = Shape1::new([3]);
    let f = Field1::from_fn(shape, |[i]| i as f32);
    let mut out = Field1::zeros(shape);
    Loop1D::interior(&shape).run(Double, (&f, &mut out)).unwrap();
    Loop1D::interior(&shape).run(AddTo, (&f, &mut out)).unwrap();
    assert_eq!(out.to_vec(), [0.0, 3.0, 6.0]);
}
