#![deny(warnings)]
// Helpers of one name (and one body) in two modules, and a helper defined inside a function:
// each has its own twin, and no warning.
use stencil_runtime::prelude::*;

mod a {
    use stencil_runtime::prelude::*;
    #[stencil_fn]
    pub fn sq(x: f64) -> f64 {
        x * x
    }
}

mod b {
    use stencil_runtime::prelude::*;
    #[stencil_fn]
    pub fn sq(x: f64) -> f64 {
        x * x
    }
}

mod use_a {
    use super::a::sq;
    use stencil_runtime::prelude::*;
    #[stencil]
    pub fn square(idx: Idx1, u: &Field1<f64>, out: &mut Field1<f64>) {
        out[idx] = sq(u[idx]);
    }
}

fn main() {
    #[stencil_fn]
    fn half(x: f64) -> f64 {
        0.5 * x
    }
    #[stencil]
    fn halve(idx: Idx1, u: &Field1<f64>, out: &mut Field1<f64>) {
        out[idx] = half(u[idx]);
    }
    let shape = Shape1::new([5]);
    let u = Field1::from_fn(shape, |[i]| i as f64);
    let (mut out, mut half_out) = (Field1::zeros(shape), Field1::zeros(shape));
    Loop1D::interior(&shape).run(use_a::Square, (&u, &mut out)).unwrap();
    Loop1D::interior(&shape).run(Halve, (&u, &mut half_out)).unwrap();
    assert_eq!(out.get([3]), Some(9.0));
    assert_eq!(half_out.get([3]), Some(1.5));
    assert_eq!(b::sq(2.0), 4.0);
}
