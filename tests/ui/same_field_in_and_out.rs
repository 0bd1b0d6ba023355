use stencil_runtime::prelude::*;

#[stencil]
fn smooth(idx: Idx1, f: &Field1<f32>, out: &mut Field1<f32>) {
    out[idx] = 0.5 * (f[idx.ix::<-1>()] + f[idx.ix::<1>()]);
}

fn main() {
    let shape = Shape1::new([16]).halo(1);
    let mut f = Field1::<f32>::zeros(shape);
    // Updating a field in place would race: the borrow checker refuses it.
    Loop1D::interior(&shape).run(Smooth, (&f, &mut f)).unwrap();
}
