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
