//! Held scalars on the host and on host subdomains (`stencil_tests::held_check`): read by
//! stencils as their values, written by reductions, a one-point clock, recorded steps.

use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Distributed};
use stencil_tests::held_check::check_held;

#[test]
fn held_scalars_on_the_host_give_the_bits_of_their_values() {
    for seed in 0..4 {
        check_held(&Host, seed);
    }
}

#[test]
fn held_scalars_on_host_subdomains_give_the_bits_of_their_values() {
    for (seed, grid) in [[2, 1, 1], [1, 2, 2], [3, 2, 1]].into_iter().enumerate() {
        let d = Decomposition::new([12, 10, 8], grid, [false; 3], [1; 3]).unwrap();
        check_held(&Distributed::host(d).unwrap(), seed as u64);
    }
}

/// A held scalar of another distributed executor is refused by a launch, by `reduce_into` and by
/// `set_held`, each naming what it was given; nothing is written.
#[test]
fn a_held_scalar_of_another_executor_is_refused_with_the_call() {
    use stencil_runtime::Executor;
    use stencil_tests::held_check::{HeldAxpy, HeldStats};
    let d = Decomposition::new([12, 10, 8], [2, 1, 1], [false; 3], [1; 3]).unwrap();
    let (ours, theirs) = (Distributed::host(d).unwrap(), Distributed::host(d).unwrap());
    let shape = Shape3::new([12, 10, 8]).halo(1);
    let x = ours.upload(&Field3::from_fn(shape, |_| 1.0)).unwrap();
    let mut out = ours.upload(&Field3::from_fn(shape, |_| f64::NAN)).unwrap();
    let foreign = theirs.held(2.0).unwrap();
    let range = Loop3D::interior(&shape);
    let e = ours.run(&range, HeldAxpy, (&foreign, 1.0, &x, &x, &mut out)).unwrap_err().to_string();
    assert!(e.contains("held_axpy") && e.contains("held scalar"), "{e}");
    assert!(ours.download(&out).unwrap().interior_view().iter().all(|v| v.is_nan()), "nothing written");
    let e = ours.reduce_into(&range, HeldStats, None, (&x, &mut Max::new(), &mut Sum::new()), &[&foreign, &foreign]);
    assert!(e.unwrap_err().to_string().contains("held_stats"));
    assert!(ours.set_held(&foreign, 1.0).unwrap_err().to_string().contains("set_held"));
}
