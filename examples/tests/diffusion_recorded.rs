//! The diffusion time loop runs plain steps first (`WARM_UP`, one more for an odd count) and then
//! replays a recorded pair of steps: the result must be bit-identical to issuing every step by
//! hand from the initial field, for even and odd step counts (fewer and more than the plain
//! ones), and progress is reported once per step in order.

use stencil_examples::checkpoint::Plan;
use stencil_examples::diffusion::{run, Real, Setup};
use stencil_runtime::prelude::*;
use stencil_runtime::Host;

/// `steps` plain steps on the host, swapping the buffers after each.
fn by_hand<T: Real>(setup: &Setup) -> Field3<T> {
    let range = Loop3D::interior(&setup.shape());
    let c = setup.coefficients();
    let mut f = setup.initial::<T>().unwrap();
    let mut f_new = f.clone();
    for _ in 0..setup.steps {
        T::step(&Host, &range, &c, &f, &mut f_new).expect("step");
        std::mem::swap(&mut f, &mut f_new);
    }
    f
}

fn bits<T: Real>(f: &Field3<T>) -> Vec<u64> {
    f.as_slice().iter().map(|&v| Into::<f64>::into(v).to_bits()).collect()
}

fn check<T: Real>(order: Order) {
    for steps in [0, 1, 2, 5, 8, 9, 12, 15] {
        let setup = Setup { order, ..Setup::cube(12, steps) };
        let mut seen = Vec::new();
        let (f, _) = run::<Host, T>(&Host, &setup, &Plan::none(), |s| seen.push(s)).expect("runs");
        assert_eq!(seen, (1..=steps).collect::<Vec<_>>(), "{steps} steps: progress out of order");
        assert!(
            bits(&f) == bits(&by_hand::<T>(&setup)),
            "{} {order:?}, {steps} steps: differs from plain steps",
            T::NAME
        );
    }
}

/// Passes of several steps over the grid (on the host) give the plain steps' bits too, with
/// progress once per step in order.
#[test]
fn passes_equal_plain_steps() {
    for (order, per_pass) in [(Order::Ijk, 2), (Order::Ijk, 5), (Order::Kij, 16)] {
        for steps in [0, 9, 11, 12, 15, 40] {
            let setup = Setup { order, pass_steps: per_pass, ..Setup::cube(12, steps) };
            let mut seen = Vec::new();
            let (f, _) = run::<Host, f32>(&Host, &setup, &Plan::none(), |s| seen.push(s)).expect("runs");
            assert_eq!(seen, (1..=steps).collect::<Vec<_>>(), "{steps} steps: progress out of order");
            let plain = Setup { pass_steps: 1, ..setup };
            assert!(
                bits(&f) == bits(&by_hand::<f32>(&plain)),
                "{order:?}, {steps} steps, {per_pass} per pass: differs from plain steps"
            );
        }
    }
}

#[test]
fn recorded_pairs_equal_plain_steps_f32() {
    check::<f32>(Order::Ijk);
}

#[test]
fn recorded_pairs_equal_plain_steps_f64_kij() {
    check::<f64>(Order::Kij);
}
