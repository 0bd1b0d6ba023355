// A scalar parameter may be called `range` (or `args`): the names the generated `run_host` uses
// for itself must not capture the user's.
use stencil_runtime::prelude::*;

#[stencil]
fn clip(idx: Idx1, range: f32, args: f32, f: &Field1<f32>, out: &mut Field1<f32>) {
    out[idx] = f[idx].min(range) + args;
}

fn main() {
    let shape = Shape1::new([4]);
    let f = Field1::from_fn(shape, |[i]| i as f32);
    let mut out = Field1::zeros(shape);
    Loop1D::interior(&shape).run(Clip, (2.0, 0.5, &f, &mut out)).unwrap();
    assert_eq!(out.to_vec(), [0.5, 1.5, 2.5, 2.5]);
}
