//! The moist bubble of Bryan and Fritsch (2002) at CI resolutions: the warm bubble's buoyancy in
//! a saturated, moist-neutral atmosphere (θ_e = 320 K, total water 0.02), reversible (no rain).
//! The solution stays mirror symmetric to round-off; dry air and water are conserved to 1e-12
//! relative; the total water mixing ratio, uniform at the start, stays uniform to round-off
//! (the water moves with the air's mass fluxes); the bubble rises as fast as the dry bubble
//! within a quarter (Bryan and Fritsch's point: the moist thermal behaves like the dry one).
//! With Kessler rain, rain forms and falls out, and the water in the air plus the rain on the
//! ground is conserved. Host subdomains give the single domain's bits, and the NetCDF file of
//! the binary's sections reads back as the state it was written from.

use stencil_examples::checkpoint::Plan;
use stencil_examples::dycore::{Case, Dycore, OUTPUT};
use stencil_runtime::io::netcdf::Dataset;
use stencil_runtime::{Distributed, Field3, Host, Loop3D};

fn at(f: &Field3<f64>, i: usize, k: usize) -> f64 {
    f.get([i as isize, 0, k as isize]).unwrap()
}

/// The moist bubble at spacing `dx`, with or without rain, run to `t`: the initial and final
/// host states.
fn run(dx: f64, rain: bool, t: f64) -> (Dycore, Vec<Field3<f64>>, Vec<Field3<f64>>) {
    let mut d = Dycore::new(Case::MoistBubble, dx, 1).unwrap();
    d.rain = rain;
    let run = d.run_with(&Host, t, &Plan::none(), None, |_, _| {}, |_, _| Ok(())).unwrap();
    eprintln!("dx = {dx} m, rain {rain}: {} steps to {t} s", run.steps);
    (d, run.initial, run.state)
}

#[test]
fn the_moist_bubble_rises_like_the_dry_one_symmetric_and_conserving_air_and_water() {
    let (d, q0, q) = run(500.0, false, 400.0);
    let [nx, _, nz] = d.n;
    // Mirror: cell i <-> nx-1-i; u face i <-> face nx-2-i (periodic).
    let (mut asym, mut asym_u, mut spread) = (0.0f64, 0.0f64, 0.0f64);
    for k in 0..nz {
        for i in 0..nx {
            let m = nx - 1 - i;
            for v in [0, 3, 4, 5, 6, 7] {
                asym = asym.max((at(&q[v], i, k) - at(&q[v], m, k)).abs() / at(&q[v], i, k).abs().max(1e-3));
            }
            asym_u = asym_u.max((at(&q[1], i, k) + at(&q[1], (2 * nx - 2 - i) % nx, k)).abs());
            let water = at(&q[5], i, k) + at(&q[6], i, k) + at(&q[7], i, k);
            spread = spread.max((water / (at(&q[0], i, k) - water) - 0.02).abs());
        }
    }
    let ((dry0, water0, _), (dry, water, ground)) = (d.water(&q0), d.water(&q));
    let (dry_change, water_change) = ((dry - dry0) / dry0, (water - water0) / water0);
    let (_, wm) = d.max_wind(&q);
    let w = |(i, k): (usize, usize)| at(&q[3], i, k) / (0.5 * (at(&q[0], i, k) + at(&q[0], i, k + 1)));
    let w_up = (0..nz - 1).flat_map(|k| (0..nx).map(move |i| (i, k))).map(w).fold(0.0, f64::max);
    let dry_bubble = Dycore::new(Case::Bubble, 500.0, 1).unwrap();
    let (qd, _, _) = dry_bubble.run(&Host, 400.0, &Plan::none(), |_, _| {}).unwrap();
    let (_, wm_dry) = dry_bubble.max_wind(&qd);
    eprintln!(
        "asymmetry {asym:.1e} (relative), U {asym_u:.1e}; dry air {dry_change:.1e}, water {water_change:.1e}, \
         ground {ground}; q_t spread {spread:.1e}; max |w| {wm:.2} m/s (dry bubble {wm_dry:.2}), largest upward {w_up:.2}"
    );
    assert!(asym < 1e-10 && asym_u < 1e-10, "asymmetry {asym}, {asym_u}");
    assert!(dry_change.abs() < 1e-12 && water_change.abs() < 1e-12, "dry air {dry_change}, water {water_change}");
    assert!(ground == 0.0, "no rain without --rain: {ground}");
    assert!(spread < 1e-12, "total water no longer uniform: {spread}");
    assert!(wm > 2.0 && wm < 20.0 && w_up >= wm * 0.999, "max |w| {wm}, upward {w_up}");
    assert!((wm / wm_dry - 1.0).abs() < 0.25, "moist {wm} m/s against dry {wm_dry} m/s");
}

#[test]
fn rain_forms_and_falls_out_and_the_water_budget_closes() {
    let (d, q0, q) = run(1000.0, true, 600.0);
    let ((dry0, water0, _), (dry, water, ground)) = (d.water(&q0), d.water(&q));
    let budget = (water + ground - water0) / water0;
    let qr = (0..d.n[2]).flat_map(|k| (0..d.n[0]).map(move |i| (i, k))).map(|(i, k)| {
        let (_, _, w) = d.moist_cell(&q, [i, 0, k]);
        w[2]
    });
    let qr = qr.fold(0.0, f64::max);
    eprintln!(
        "dry air {:.1e}, water + ground {budget:.1e}; rain on the ground {ground:.3e} kg, max q_r {qr:.2e}",
        (dry - dry0) / dry0
    );
    assert!(((dry - dry0) / dry0).abs() < 1e-12 && budget.abs() < 1e-12, "dry air {dry} / {dry0}, water {budget}");
    assert!(qr > 1e-4 && ground > 0.0, "rain forms ({qr}) and reaches the ground ({ground})");
}

#[test]
fn subdomains_give_the_single_domain_bits() {
    let mut d = Dycore::new(Case::MoistBubble, 1000.0, 1).unwrap();
    d.rain = true;
    let t = 10.0 * d.dt;
    let bits = |q: &[Field3<f64>]| -> Vec<u64> {
        q.iter().flat_map(|f| f.read_range(&Loop3D::interior(f.shape())).unwrap()).map(f64::to_bits).collect()
    };
    let single = d.run_with(&Host, t, &Plan::none(), None, |_, _| {}, |_, _| Ok(())).unwrap();
    let exec = Distributed::host(d.decompose(2, Some([2, 1, 1])).unwrap()).unwrap();
    let split = d.run_with(&exec, t, &Plan::none(), None, |_, _| {}, |_, _| Ok(())).unwrap();
    assert_eq!(single.state.len(), 9);
    assert!(bits(&single.state) == bits(&split.state), "[2, 1, 1] subdomains differ from the single domain");
    // The initial state a run gives back (the budgets' reference) is the case's, not the end's.
    let initial = bits(&d.initial_all().0);
    assert!(bits(&single.initial) == initial && bits(&split.initial) == initial, "not the case's initial state");
    assert!(bits(&single.state) != initial, "the run did not move");
}

#[test]
fn the_netcdf_sections_read_back_as_the_state() {
    let mut d = Dycore::new(Case::MoistBubble, 1000.0, 1).unwrap();
    d.rain = true;
    let (mut frames, mut last) = (Vec::new(), Vec::new());
    let out = |t: f64, q: &[Field3<f64>]| {
        frames.push(d.section(t, q));
        last = q.to_vec();
        Ok(())
    };
    d.run_with(&Host, 300.0, &Plan::none(), Some(100.0), |_, _| {}, out).unwrap();
    let path = std::env::temp_dir().join(format!("dycore-moist-{}.nc", std::process::id()));
    d.write_netcdf(&path, &frames).unwrap();
    let ds = Dataset::open(&path).unwrap();
    let times = ds.coordinate("time").unwrap();
    assert_eq!(ds.text_attribute("Conventions"), Some("CF-1.8"));
    assert!(
        times.len() == 3 && (times[2] - 300.0).abs() < 1e-9 && times[0] >= 100.0 && times[0] < 100.0 + d.dt,
        "{times:?}"
    );
    let x = ds.coordinate("x").unwrap();
    assert!((x[0] + 9_500.0).abs() < 1e-9 && (x[1] - x[0] - 1000.0).abs() < 1e-9, "{x:?}");
    for (name, units, _) in OUTPUT {
        assert_eq!(ds.variable(name).unwrap().text_attribute("units"), Some(units));
    }
    // q_r and u at the last time against the state it was written from.
    let (qr, u): (Field3<f64>, Field3<f64>) = (ds.read("qr", 0).unwrap(), ds.read("u", 0).unwrap());
    let [nx, _, nz] = d.n;
    let (mut worst, mut largest) = (0.0f64, 0.0f64);
    for k in 0..nz {
        for i in 0..nx {
            let q = &last;
            let dry = at(&q[0], i, k) - at(&q[5], i, k) - at(&q[6], i, k) - at(&q[7], i, k);
            let file = qr.get([i as isize, k as isize, 2]).unwrap();
            worst = worst.max((file - at(&q[7], i, k) / dry).abs());
            largest = largest.max(file);
            let face = |i: usize| at(&q[1], i % nx, k) / (0.5 * (at(&q[0], i % nx, k) + at(&q[0], (i + 1) % nx, k)));
            worst = worst.max((u.get([i as isize, k as isize, 2]).unwrap() - 0.5 * (face(i + nx - 1) + face(i))).abs());
        }
    }
    std::fs::remove_file(&path).unwrap();
    assert!(largest > 1e-5 && worst < 1e-15, "q_r up to {largest}: file and state differ by {worst}");
}
