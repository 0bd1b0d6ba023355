//! Small arrays and `#[stencil_fn]` helpers: a finite-volume Euler flux (MUSCL reconstruction
//! with minmod, Rusanov flux; 5 inputs, 5 outputs) against a plain loop that calls the same
//! helpers as ordinary Rust functions. Outputs are poisoned, the whole fields compared bit for
//! bit (the inlined helpers evaluate the same operations in the same order).

mod common;

use common::*;
use stencil_runtime::prelude::*;
use stencil_tests::{assert_bits_eq, for_each_in_range, nb, poisoned, SplitMix64};

#[test]
fn euler_flux_matches_plain_rust() {
    let mut rng = SplitMix64::new(11);
    for order in [Order::Ijk, Order::Kij] {
        let shape = Shape3::new([19, 6, 5]).halo_per_axis([2, 0, 0]).order(order);
        let [rho, mx, my, mz, e] = euler_state(shape, || rng.unit());
        let range = Loop3D::interior(&shape).shrink([1, 0, 0]).grow([0, 0, 0]).unwrap();
        let mut out: [Field3<f64>; 5] = std::array::from_fn(|_| poisoned(shape));
        let mut want = out.clone();
        let [f0, f1, f2, f3, f4] = &mut out;
        range.run(EulerFluxX, (1.4, &rho, &mx, &my, &mz, &e, f0, f1, f2, f3, f4)).unwrap();
        let fields = [&rho, &mx, &my, &mz, &e];
        for_each_in_range(&range, &shape, |g| {
            let q = |di: isize| fields.map(|f| nb(f, g, [di, 0, 0]));
            let (ql, qr) = muscl(q(-1), q(0), q(1), q(2));
            let f = rusanov(ql, qr, 1.4);
            for v in 0..5 {
                want[v].set(g, f[v]).unwrap();
            }
        });
        for v in 0..5 {
            assert_bits_eq(&out[v], &want[v], &format!("euler flux component {v}, {order:?}"));
        }
    }
}

#[test]
fn helpers_are_plain_functions() {
    assert_eq!(minmod(1.0, 2.0), 1.0);
    assert_eq!(minmod(-1.0, 2.0), 0.0);
    let q = [1.0, 0.0, 0.0, 0.0, 0.5];
    assert_eq!(pressure(q, 3.0), 1.0);
    let f = rusanov(q, q, 3.0);
    assert_eq!(f, [0.0, 1.0, 0.0, 0.0, 0.0]);
}
