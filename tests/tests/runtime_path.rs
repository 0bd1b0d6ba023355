//! `#[stencil(crate = path)]`: a crate that reaches the runtime through a re-export names it.
//! (A renamed dependency is found without the argument: `tests/renamed-dependency`, run by CI.)

mod models {
    /// The runtime as another crate would re-export it.
    pub use stencil_runtime as engine;
}

use stencil_runtime::prelude::*;

#[stencil(crate = models::engine)]
fn double(idx: Idx1, u: &Field1<f32>, out: &mut Field1<f32>) {
    out[idx] = 2.0 * u[idx.ix::<1>()];
}

#[stencil(crate = "models::engine")]
fn halve(idx: Idx1, u: &Field1<f32>, out: &mut Field1<f32>) {
    out[idx] = 0.5 * u[idx.ix::<-1>()];
}

#[test]
fn a_stencil_names_the_runtime_through_a_reexport() {
    let shape = Shape1::new([29]).halo(1);
    let u = Field1::from_fn(shape, |[i]| (i * i) as f32 - 3.0);
    let (mut doubled, mut halved) = (Field1::filled(shape, f32::NAN), Field1::filled(shape, f32::NAN));
    Loop1D::interior(&shape).run(Double, (&u, &mut doubled)).expect("runs");
    Loop1D::interior(&shape).run(Halve, (&u, &mut halved)).expect("runs");
    for i in 0..29isize {
        assert_eq!(doubled.get([i]), Some(2.0 * ((i + 1) * (i + 1)) as f32 - 6.0), "point {i}");
        assert_eq!(halved.get([i]), Some(0.5 * (((i - 1) * (i - 1)) as f32 - 3.0)), "point {i}");
    }
}
