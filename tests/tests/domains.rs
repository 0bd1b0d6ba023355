//! Decomposition and halo exchange on host subdomains (the GPU side is `gpu_executor.rs`):
//! random process grids, uneven splits, periodic and walled axes, 1D to 3D, both element orders,
//! halos poisoned before each exchange (see `stencil_tests::exchange_check`); and the errors of
//! decompositions and exchanges that cannot work.

use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Domains, HaloWidths};
use stencil_tests::canonical::{Diffusion, Star25};
use stencil_tests::exchange_check::check_exchange;
use stencil_tests::SplitMix64;

/// A random decomposition of `D` axes that fits: per axis 1 to 3 domains, a halo of 1 to 3,
/// an extent of at least `domains * halo` (with an uneven remainder), walls or wrap.
fn random_case<const D: usize>(rng: &mut SplitMix64) -> ([usize; D], [usize; D], [bool; D], [usize; D]) {
    let grid: [usize; D] = std::array::from_fn(|_| rng.int(1, 3) as usize);
    let halo: [usize; D] = std::array::from_fn(|_| rng.int(1, 3) as usize);
    let global = std::array::from_fn(|a| grid[a] * halo[a] + rng.int(0, 7) as usize);
    let periodic = std::array::from_fn(|_| rng.int(0, 1) == 1);
    (global, grid, periodic, halo)
}

#[test]
fn every_face_edge_and_corner_arrives_for_random_process_grids() {
    let mut rng = SplitMix64::new(2026);
    let mut checked = 0;
    for case in 0..40 {
        let order = if case % 2 == 0 { Order::Ijk } else { Order::Kij };
        let (g, p, w, h) = random_case::<3>(&mut rng);
        checked += check_exchange(g, p, w, h, order, case, |_| Host).unwrap();
        let (g, p, w, h) = random_case::<2>(&mut rng);
        checked += check_exchange(g, p, w, h, order, case, |_| Host).unwrap();
        let (g, p, w, h) = random_case::<1>(&mut rng);
        checked += check_exchange(g, p, w, h, order, case, |_| Host).unwrap();
    }
    // Edge cases: one domain along a periodic axis (its halo from itself), 1×1×N and N×1×1.
    checked += check_exchange([5, 4, 6], [1, 1, 3], [true, false, true], [2, 1, 2], Order::Ijk, 1, |_| Host).unwrap();
    checked += check_exchange([9, 3, 3], [4, 1, 1], [false, true, true], [2, 1, 1], Order::Kij, 2, |_| Host).unwrap();
    assert!(checked > 10_000, "only {checked} halo points checked");
}

#[test]
fn exchange_then_boundary_fills_equal_one_fill_of_the_whole_field() {
    use stencil_tests::exchange_check::check_boundary;
    let fills = [HaloFill::Mirror, HaloFill::MirrorNegated, HaloFill::ZeroGradient];
    let mut rng = SplitMix64::new(77);
    let mut compared = 0;
    for case in 0..30 {
        let order = if case % 2 == 0 { Order::Ijk } else { Order::Kij };
        let walls = std::array::from_fn(|_| fills[rng.int(0, 2) as usize]);
        let (g, p, w, h) = random_case::<3>(&mut rng);
        compared += check_boundary(g, p, w, walls, h, order, case, |_| Host).unwrap();
        let (g, p, w, h) = random_case::<2>(&mut rng);
        compared += check_boundary(g, p, w, [walls[0], walls[1]], h, order, case, |_| Host).unwrap();
    }
    assert!(compared > 10_000, "{compared}");
}

#[test]
fn halo_widths_come_from_the_stencils_and_bad_decompositions_are_refused() {
    let diffusion = HaloWidths::<3>::of::<Diffusion>("f").unwrap();
    assert_eq!(diffusion.0, [1, 1, 1]);
    let both = diffusion.read_by::<Star25>("u").unwrap();
    assert_eq!(both.0, [4, 4, 4]);
    assert_eq!(HaloWidths::<3>::of::<Diffusion>("f_new").unwrap().0, [0, 0, 0], "written only at the point");
    let e = HaloWidths::<3>::of::<Diffusion>("g").unwrap_err();
    assert!(e.to_string().contains("has no field parameter `g`") && e.to_string().contains("\"f\""), "{e}");

    let e = Decomposition::new([8, 8, 8], [3, 1, 1], [false; 3], both.0).unwrap_err();
    assert!(e.to_string().contains("thinner than the halo of 4"), "{e}");
    let e = Decomposition::new([8, 2, 8], [1, 3, 1], [false; 3], [1; 3]).unwrap_err();
    assert!(e.to_string().contains("along axis 1"), "{e}");

    let d = Decomposition::new([8, 8, 8], [2, 1, 1], [false; 3], [1; 3]).unwrap();
    let e = Domains::new(d, vec![Host]).unwrap_err();
    assert!(e.to_string().contains("1 executors for the 2 subdomains"), "{e}");
    let domains = Domains::new(d, vec![Host, Host]).unwrap();
    let like = Shape3::new([8, 8, 8]).halo(1);
    // Fields of another decomposition (the whole grid twice) are refused, naming the subdomain.
    let mut wrong = vec![Field3::<f32>::zeros(like), Field3::<f32>::zeros(like)];
    let e = domains.exchange(&mut wrong).unwrap_err();
    assert!(e.to_string().contains("subdomain 0") && e.to_string().contains("Subdomain::shape"), "{e}");
    let mut parts: Vec<_> = d.subdomains().map(|s| Field3::<f32>::zeros(s.shape(&like))).collect();
    let e = domains.fill_boundary(&mut [(&mut parts[..], [Some(HaloFill::Periodic), None, None])]).unwrap_err();
    assert!(e.to_string().contains("declare the axis periodic"), "{e}");
    let mut too_few = vec![Field3::<f32>::zeros(d.subdomain(0).shape(&like))];
    assert!(domains.exchange(&mut too_few).unwrap_err().to_string().contains("one field per subdomain"));
}
