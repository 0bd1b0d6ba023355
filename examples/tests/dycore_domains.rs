//! The dynamical core over host subdomains (its one `run` on the distributed executor) equals
//! the single-domain run bit for bit: a 3D flow (10 m/s) over a hill with a sponge, periodic in
//! x and y, split 2 and 4 ways along x and y (whole columns: the vertical solve sweeps them);
//! and the 2D warm bubble split along x; the same flow with open (zero-gradient) boundaries
//! along x, split across them. A grid that splits the columns is refused with the grid to use.

use stencil_examples::checkpoint::Plan;
use stencil_examples::dycore::{Case, Dycore, Lateral};
use stencil_runtime::{Distributed, Field3, Host, Loop3D};

fn bits(q: &[Field3<f64>; 5]) -> Vec<u64> {
    q.iter().flat_map(|f| f.read_range(&Loop3D::interior(f.shape())).unwrap()).map(f64::to_bits).collect()
}

fn check(d: &Dycore, t: f64, grids: &[[usize; 3]]) {
    let (single, steps, _) = d.run(&Host, t, &Plan::none(), |_, _| {}).unwrap();
    let (um, wm) = d.max_wind(&single);
    assert!(um > 1.0 && wm > 1e-3, "the flow moves: {um} {wm}");
    for &grid in grids {
        let exec = Distributed::host(d.decompose(grid.iter().product(), Some(grid)).unwrap()).unwrap();
        let (q, steps_d, _) = d.run(&exec, t, &Plan::none(), |_, _| {}).unwrap();
        let same = bits(&q) == bits(&single);
        eprintln!("{:?} grid {grid:?}: {steps_d} steps, bit-equal {same}", d.case);
        assert!(same && steps_d == steps, "{:?} grid {grid:?} differs from the single domain", d.case);
    }
}

#[test]
fn subdomains_equal_the_single_domain_bit_for_bit() {
    let mut hill = Dycore::new(Case::Rest, 2000.0, 8).unwrap();
    (hill.n[0], hill.n[2], hill.u_ref, hill.mountain) = (16, 10, 10.0, 400.0);
    check(&hill, 5.0 * hill.dt, &[[2, 1, 1], [1, 2, 1], [2, 2, 1], [4, 1, 1]]);
    let bubble = Dycore::new(Case::Bubble, 1000.0, 1).unwrap();
    check(&bubble, 10.0 * bubble.dt, &[[2, 1, 1], [4, 1, 1]]);
}

/// Open boundaries along x (the flow enters and leaves through zero-gradient halos) decompose
/// like periodic ones: each part fills the sides on the grid's edge, and exchanges across the
/// cuts only (no wrap). The open run differs from the periodic one (the setting is in effect).
#[test]
fn open_boundaries_equal_the_single_domain_bit_for_bit() {
    let mut periodic = Dycore::new(Case::Rest, 2000.0, 8).unwrap();
    (periodic.n[0], periodic.n[2], periodic.u_ref, periodic.mountain) = (16, 10, 10.0, 400.0);
    let mut open = periodic.clone();
    open.lateral[0] = Lateral::Open;
    let t = 5.0 * open.dt;
    let one = |d: &Dycore| bits(&d.run(&Host, t, &Plan::none(), |_, _| {}).unwrap().0);
    assert_ne!(one(&open), one(&periodic), "open boundaries along x change the flow");
    check(&open, t, &[[2, 1, 1], [4, 1, 1], [2, 2, 1]]);
}

#[test]
fn a_grid_that_splits_the_columns_is_refused() {
    let d = Dycore::new(Case::Bubble, 1000.0, 1).unwrap();
    let exec = Distributed::host(d.decompose(2, Some([1, 1, 2])).unwrap()).unwrap();
    let e = d.run(&exec, d.dt, &Plan::none(), |_, _| {}).unwrap_err().to_string();
    assert!(e.contains("sweeps its columns along axis 2") && e.contains("process grid of 1 along axis 2"), "{e}");
}
