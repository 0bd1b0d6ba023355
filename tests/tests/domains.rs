//! Decomposition and halo exchange on host subdomains (the GPU side is `gpu_executor.rs`):
//! random process grids, uneven splits, periodic and walled axes, 1D to 3D, both element orders,
//! halos poisoned before each exchange (see `stencil_tests::exchange_check`); and the errors of
//! decompositions and exchanges that cannot work.

use stencil_runtime::prelude::*;
use stencil_runtime::{BoundaryFillError, Decomposition, DistributionError, Domains, HaloWidths};
use stencil_tests::canonical::{Diffusion, Star25};
use stencil_tests::exchange_check::{check_domains, Case};
use stencil_tests::SplitMix64;

/// A random decomposition of `D` axes that fits: per axis 1 to 3 domains, a halo of 1 to 3
/// and a depth of 0 to the halo for the second field, an extent of at least `domains * halo`
/// (with an uneven remainder), walls (a random fill) or wrap.
fn random_case<const D: usize>(rng: &mut SplitMix64, seed: u64) -> Case<D> {
    let fills = [HaloFill::Mirror, HaloFill::MirrorNegated, HaloFill::ZeroGradient];
    let grid: [usize; D] = std::array::from_fn(|_| rng.int(1, 3) as usize);
    let halo: [usize; D] = std::array::from_fn(|_| rng.int(1, 3) as usize);
    Case {
        global: std::array::from_fn(|a| grid[a] * halo[a] + rng.int(0, 7) as usize),
        grid,
        periodic: std::array::from_fn(|_| rng.int(0, 1) == 1),
        halo,
        depth: std::array::from_fn(|a| rng.int(0, halo[a] as i64) as usize),
        walls: std::array::from_fn(|_| fills[rng.int(0, 2) as usize]),
        order: if seed.is_multiple_of(2) { Order::Ijk } else { Order::Kij },
        seed,
    }
}

/// Checks `case` on host subdomains in one process.
fn check_host<const D: usize>(case: Case<D>) -> usize {
    let d = case.decomposition().unwrap();
    check_domains(&Domains::new(d, vec![Host; d.len()]).unwrap(), &case).unwrap()
}

#[test]
fn every_face_edge_and_corner_arrives_for_random_process_grids() {
    let mut rng = SplitMix64::new(2026);
    let mut checked = 0;
    for seed in 0..40 {
        checked += check_host(random_case::<3>(&mut rng, seed));
        checked += check_host(random_case::<2>(&mut rng, seed));
        checked += check_host(random_case::<1>(&mut rng, seed));
    }
    // Edge cases: one domain along a periodic axis (its halo from itself), 1×1×N and N×1×1.
    let case = Case::walled;
    checked += check_host(case([5, 4, 6], [1, 1, 3], [true, false, true], [2, 1, 2], [1, 1, 2], Order::Ijk, 1));
    checked += check_host(case([9, 3, 3], [4, 1, 1], [false, true, true], [2, 1, 1], [2, 0, 1], Order::Kij, 2));
    assert!(checked > 30_000, "only {checked} points checked");
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
    // A given grid must have the number of domains asked for; no grid picks the least surface.
    let e = Decomposition::with_grid([8; 3], 4, Some([2, 1, 1]), [false; 3], [1; 3]).unwrap_err();
    assert!(e.to_string().contains("process grid [2, 1, 1] has 2 subdomains, not the 4 asked for"), "{e}");
    let e = Decomposition::with_grid([8; 3], 0, None, [false; 3], [1; 3]).unwrap_err();
    assert!(e.to_string().contains("0 subdomains: run on at least one"), "{e}");
    let auto = Decomposition::with_grid([8, 8, 16], 2, None, [false; 3], [1; 3]).unwrap();
    assert_eq!(auto, Decomposition::auto([8, 8, 16], 2, [false; 3], [1; 3]).unwrap());
    assert_eq!(Decomposition::with_grid([8; 3], 2, Some([1, 2, 1]), [false; 3], [1; 3]).unwrap().grid(), [1, 2, 1]);

    let d = Decomposition::new([8, 8, 8], [2, 1, 1], [false; 3], [1; 3]).unwrap();
    let e = Domains::new(d, vec![Host]).unwrap_err();
    assert!(
        matches!(&e, Error::Decomposition(DistributionError::ExecutorCount { given: 1, rank: 0, local: 2, grid })
            if grid == &[2, 1, 1]),
        "{e:?}"
    );
    assert_eq!(e.code(), "S0107");
    assert!(e.to_string().contains("1 executors on rank 0 for its 2 subdomains"), "{e}");
    let domains = Domains::new(d, vec![Host, Host]).unwrap();
    let like = Shape3::new([8, 8, 8]).halo(1);
    // Fields of another decomposition (the whole grid twice) are refused, naming the subdomain.
    let mut wrong = vec![Field3::<f32>::zeros(like), Field3::<f32>::zeros(like)];
    let e = domains.exchange(&mut wrong).unwrap_err();
    assert!(e.to_string().contains("subdomain 0") && e.to_string().contains("Subdomain::shape"), "{e}");
    let mut parts: Vec<_> = d.subdomains().map(|s| Field3::<f32>::zeros(s.shape(&like))).collect();
    let e = domains.fill_boundary(&mut [(&mut parts[..], [Some(HaloFill::Periodic), None, None])]).unwrap_err();
    assert_eq!(
        e,
        Error::Decomposition(DistributionError::BoundaryFill(BoundaryFillError::PeriodicOnSplitAxis {
            axis: 0,
            parts: 2
        }))
    );
    assert!(e.to_string().contains("declare the axis periodic"), "{e}");
    // Along an axis the decomposition already wraps, the message says so (not "declare it").
    let wrapped = Decomposition::new([8, 8, 8], [2, 1, 1], [true, false, false], [1; 3]).unwrap();
    let wrapped = Domains::new(wrapped, vec![Host, Host]).unwrap();
    let e = wrapped.fill_boundary(&mut [(&mut parts[..], [Some(HaloFill::Periodic), None, None])]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Decomposition(DistributionError::BoundaryFill(BoundaryFillError::PeriodicOnWrappedAxis { axis: 0 }))
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("already makes periodic") && !e.to_string().contains("declare"), "{e}");
    let mut too_few = vec![Field3::<f32>::zeros(d.subdomain(0).shape(&like))];
    let e = domains.exchange(&mut too_few).unwrap_err();
    assert!(e.to_string().contains("pass one list of fields per subdomain"), "{e}");
    // A field appended with a depth beyond its halo, or as another element type.
    let mut ex = stencil_runtime::HaloExchange::new(&domains);
    ex.append::<f32>("u", HaloWidths([2, 1, 1]));
    let mut fields: Vec<Vec<_>> = parts.iter_mut().map(|p| vec![stencil_runtime::ErasedField::of(p)]).collect();
    let e = ex.exchange(&mut fields).unwrap_err();
    assert!(e.to_string().contains("`u` has halo 1 along axis 0, but the exchange fills 2 layers"), "{e}");
    let mut doubles: Vec<_> = d.subdomains().map(|s| Field3::<f64>::zeros(s.shape(&like))).collect();
    let mut ex = stencil_runtime::HaloExchange::new(&domains);
    ex.append::<f32>("u", HaloWidths([1, 1, 1]));
    let mut fields: Vec<Vec<_>> = doubles.iter_mut().map(|p| vec![stencil_runtime::ErasedField::of(p)]).collect();
    let e = ex.exchange(&mut fields).unwrap_err();
    assert!(e.to_string().contains("holds f64, but it was appended as f32"), "{e}");
}

/// Four leapfrog steps of the 25-point star (reach 4) on random grids with periodic and walled
/// axes (the walls mirrored by `fill_boundary` inside the exchange), in every overlap mode of
/// `CompCommBinder` (subdomains too thin to split run whole), equal bit for bit to the
/// single-domain run with the same halo fills.
#[test]
fn every_overlap_mode_gives_the_single_domain_bits() {
    use stencil_runtime::{CompCommBinder, ErasedField, HaloExchange, Halos, Overlap};
    use stencil_tests::exchange_check::random_global;
    let reach = HaloWidths::<3>::of::<Star25>("u").unwrap();
    let mut rng = SplitMix64::new(404);
    for case in 0..6u64 {
        let grid: [usize; 3] = std::array::from_fn(|_| rng.int(1, 2) as usize);
        let periodic: [bool; 3] = std::array::from_fn(|_| rng.int(0, 1) == 1);
        let fills = periodic.map(|p| Some(if p { HaloFill::Periodic } else { HaloFill::Mirror }));
        // Some subdomains thinner than 2 × 4 points (not split), most thicker.
        let global: [usize; 3] = std::array::from_fn(|a| grid[a] * 4 + rng.int(0, 9) as usize);
        let to32 = |f: Field3<f64>| Field3::from_fn(*f.shape(), |g| f.get(g).unwrap() as f32);
        let [u0, p0, v0] = [1, 2, 3].map(|k| to32(random_global(global, reach.0, Order::Ijk, 10 * case + k)));
        let v0 = Field3::from_fn(*v0.shape(), |g| 0.05 * v0.get(g).unwrap().abs());
        let (range, steps) = (Loop3D::interior(u0.shape()), 4);
        // The single domain.
        let (mut u, mut p, mut next) = (u0.clone(), p0.clone(), Field3::zeros(*u0.shape()));
        for _ in 0..steps {
            Host.fill_halos(&mut [(&mut u, fills)]).unwrap();
            range.run(Star25, (0.1, &u, &p, &v0, &mut next)).unwrap();
            (p, u, next) = (u, next, p);
        }
        let d = Decomposition::new(global, grid, periodic, reach.0).unwrap();
        let walls = periodic.map(|p| (!p).then_some(HaloFill::Mirror));
        let domains = Domains::new(d, vec![Host; d.len()]).unwrap();
        for mode in Overlap::ALL {
            type Parts = [Vec<Field3<f32>>; 4];
            let mut s: Parts = [&u0, &p0, &v0, &u0].map(|f| domains.scatter(f).unwrap());
            let ranges = domains.subdomains().map(|s| Loop3D::interior(&s.shape(u0.shape()))).collect();
            let binder = CompCommBinder::new(&domains, ranges, reach.0, mode).unwrap().filling_boundary();
            let mut ex = HaloExchange::new(&domains);
            ex.append::<f32>("u", reach);
            let mut fill = |s: &mut Parts, halos: Halos| {
                let fields = if halos == Halos::Read { &mut s[0] } else { &mut s[3] };
                ex.exchange(&mut fields.iter_mut().map(|f| vec![ErasedField::of(f)]).collect::<Vec<_>>())?;
                domains.fill_boundary(&mut [(&mut fields[..], walls)])
            };
            let update = |exec: &Host, i: usize, r: &Loop3D, s: &mut Parts| {
                let [u, p, v, next] = s;
                exec.run(r, Star25, (0.1, &u[i], &p[i], &v[i], &mut next[i]))
            };
            binder.prime(&mut s, &mut fill).unwrap();
            for _ in 0..steps {
                binder.step(&domains, &mut s, &mut fill, update).unwrap();
                let [u, p, v, next] = s;
                s = [next, u, v, p];
            }
            let got = domains.gather(u0.shape(), &s[0]).unwrap().unwrap();
            let like = *u0.shape();
            let interior = like.storage_points().map(|p| like.to_global(p));
            for g in interior.filter(|g| (0..3).all(|a| g[a] >= 0 && g[a] < global[a] as isize)) {
                assert_eq!(
                    got.get(g).unwrap().to_bits(),
                    u.get(g).unwrap().to_bits(),
                    "case {case}, grid {grid:?} of {global:?}, periodic {periodic:?}, {mode:?}: point {g:?}"
                );
            }
        }
    }
}
