//! Helpers defined in a module (after their use), reaching each other, brought into scope with
//! a glob `use`; arrays in the stencil; the helpers stay ordinary functions.
use stencil_runtime::prelude::*;

mod kernels {
    use super::physics::*;
    use stencil_runtime::prelude::*;

    #[stencil]
    pub fn energy(idx: Idx2, u: &Field2<f32>, v: &Field2<f32>, out: &mut Field2<f32>) {
        let vel = [u[idx], v[idx]];
        let (ke, speed) = kinetic(vel);
        out[idx] = ke + speed;
    }
}

mod physics {
    use stencil_runtime::prelude::*;

    #[stencil_fn]
    pub fn square(x: f32) -> f32 {
        x * x
    }

    #[stencil_fn]
    pub fn kinetic(v: [f32; 2]) -> (f32, f32) {
        let mut s = 0.0;
        for a in 0..2 {
            s += square(v[a]);
        }
        (0.5 * s, s.sqrt())
    }
}

fn main() {
    let shape = Shape2::new([8, 8]);
    let u = Field2::filled(shape, 3.0f32);
    let v = Field2::filled(shape, 4.0f32);
    let mut out = Field2::zeros(shape);
    Loop2D::interior(&shape).run(kernels::Energy, (&u, &v, &mut out)).unwrap();
    assert_eq!(out.get([3, 3]), Some(17.5));
    assert_eq!(physics::kinetic([3.0, 4.0]), (12.5, 5.0));
}
