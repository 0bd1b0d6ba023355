use stencil_runtime::prelude::*;

#[stencil]
fn copy3(idx: Idx3, f: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = f[idx];
}

fn main() {
    let shape = Shape3::new([8, 8, 8]).halo(1);
    let f = Field3::<f32>::zeros(shape);
    let mut out = Field3::<f32>::zeros(shape);
    // A 3D stencil over a 2D range.
    Loop2D::new(10, 1, 1, 10, 1, 1).run(Copy3, (&f, &mut out)).unwrap();
}
