//! The column model's sweeps against independent references on random columns: the implicit
//! vertical diffusion against a dense Gaussian elimination of the same system (and the column
//! sums it conserves), the warm-rain sweep against a plain per-column loop of the same formulas
//! (bit for bit) and the water budget it closes; and a moist bubble that rains, with every
//! column's water plus the rain that left it conserved over the run.

use stencil_examples::column::{self, column_water, moist_bubble, Column, DiffuseDown, DiffuseUp, State, WarmRain};
use stencil_runtime::prelude::*;

struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
}

fn at(f: &Field3<f64>, i: usize, j: usize, k: usize) -> f64 {
    f.get([i as isize, j as isize, k as isize]).expect("inside")
}

/// Dense Gaussian elimination with partial pivoting.
fn dense_solve(mut m: Vec<Vec<f64>>, mut rhs: Vec<f64>) -> Vec<f64> {
    let n = rhs.len();
    for col in 0..n {
        let p = (col..n).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs())).unwrap();
        m.swap(col, p);
        rhs.swap(col, p);
        for r in col + 1..n {
            let f = m[r][col] / m[col][col];
            let pivot_row = m[col].clone();
            for (v, pv) in m[r].iter_mut().zip(&pivot_row).skip(col) {
                *v -= f * pv;
            }
            rhs[r] -= f * rhs[col];
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        let s: f64 = (r + 1..n).map(|c| m[r][c] * x[c]).sum();
        x[r] = (rhs[r] - s) / m[r][r];
    }
    x
}

#[test]
fn implicit_diffusion_solves_the_tridiagonal_system_and_conserves_each_column() {
    let mut rng = Rng(7);
    for (n, r) in [([6, 5, 23], 0.7), ([3, 4, 1], 2.0), ([4, 3, 40], 35.0)] {
        let shape = column::shape(n);
        let rho = Field3::from_fn(shape, |_| rng.uniform(0.4, 1.3));
        let t = Field3::from_fn(shape, |_| rng.uniform(250.0, 300.0));
        let qv = Field3::from_fn(shape, |_| rng.uniform(0.0, 0.02));
        let (mut t_new, mut qv_new) = (Field3::filled(shape, f64::NAN), Field3::filled(shape, f64::NAN));
        let (mut c, mut dt, mut dq) = (Field3::zeros(shape), Field3::zeros(shape), Field3::zeros(shape));
        let range = Loop3D::interior(&shape);
        range.run(DiffuseUp, (r, &rho, &t, &qv, &mut c, &mut dt, &mut dq)).unwrap();
        range.run(DiffuseDown, (&c, &dt, &dq, &mut t_new, &mut qv_new)).unwrap();
        let nz = n[2];
        for i in 0..n[0] {
            for j in 0..n[1] {
                let density: Vec<f64> = (0..nz).map(|k| at(&rho, i, j, k)).collect();
                let face = |k: usize| r * 0.5 * (density[k] + density[k + 1]);
                let mut m = vec![vec![0.0; nz]; nz];
                for k in 0..nz {
                    m[k][k] = density[k];
                    if k > 0 {
                        m[k][k] += face(k - 1);
                        m[k][k - 1] = -face(k - 1);
                    }
                    if k + 1 < nz {
                        m[k][k] += face(k);
                        m[k][k + 1] = -face(k);
                    }
                }
                for (old, new) in [(&t, &t_new), (&qv, &qv_new)] {
                    let x: Vec<f64> = (0..nz).map(|k| at(old, i, j, k)).collect();
                    let rhs: Vec<f64> = x.iter().zip(&density).map(|(x, d)| x * d).collect();
                    let want = dense_solve(m.clone(), rhs.clone());
                    for (k, w) in want.iter().enumerate() {
                        let got = at(new, i, j, k);
                        assert!(
                            (got - w).abs() <= 1e-12 * w.abs().max(1e-3),
                            "{n:?} r {r}: ({i},{j},{k}) {got} vs {w}"
                        );
                    }
                    let before: f64 = rhs.iter().sum();
                    let after: f64 = (0..nz).map(|k| density[k] * at(new, i, j, k)).sum();
                    assert!((before - after).abs() <= 1e-12 * before.abs(), "column ({i},{j}) Σρx {before} -> {after}");
                }
            }
        }
    }
}

/// The warm-rain step of one column, written as a plain loop from the top level down.
#[allow(clippy::too_many_arguments)]
fn warm_rain_column(
    dt: f64,
    dz: f64,
    p: &[f64],
    rho: &[f64],
    t: &mut [f64],
    qv: &mut [f64],
    qc: &mut [f64],
    qr: &mut [f64],
    out: &mut [f64],
) {
    let (lv, cp, rv) = (2.5e6, 1004.0, 461.5);
    let mut flux_above = 0.0;
    for k in (0..t.len()).rev() {
        let (mut temp, mut vapour, mut cloud, mut rain) = (t[k], qv[k], qc[k], qr[k]);
        let qs = 380.0 / p[k] * (17.27 * (temp - 273.15) / (temp - 35.86)).exp();
        let excess = (vapour - qs) / (1.0 + lv * lv * qs / (cp * rv * temp * temp));
        let change = excess.max(-cloud);
        vapour -= change;
        cloud += change;
        temp += lv / cp * change;
        let auto = (1.0e-3 * (cloud - 1.0e-3)).max(0.0) * dt;
        let accr = 2.2 * cloud * rain.max(0.0).powf(0.875) * dt;
        let to_rain = (auto + accr).min(cloud);
        cloud -= to_rain;
        rain += to_rain;
        let fall = 36.34 * (1.0e-3 * rho[k] * rain.max(0.0)).powf(0.1364) * (1.2 / rho[k]).sqrt();
        let flux = rho[k] * rain * fall;
        rain += dt * (flux_above - flux) / (rho[k] * dz);
        flux_above = flux;
        (t[k], qv[k], qc[k], qr[k], out[k]) = (temp, vapour, cloud, rain, flux);
    }
}

#[test]
fn warm_rain_matches_a_plain_column_loop_bit_for_bit_and_closes_the_water_budget() {
    let mut rng = Rng(11);
    let (n, dt, dz) = ([7, 6, 31], 4.0, 150.0);
    let shape = column::shape(n);
    let p = Field3::from_fn(shape, |g| 1.0e5 - 9.0 * dz * g[2] as f64 + rng.uniform(-50.0, 50.0));
    let rho = Field3::from_fn(shape, |g| 1.2 - 1.0e-4 * dz * g[2] as f64 * rng.uniform(0.9, 1.1));
    let state = State {
        t: Field3::from_fn(shape, |_| rng.uniform(260.0, 300.0)),
        qv: Field3::from_fn(shape, |_| rng.uniform(0.0, 0.025)),
        qc: Field3::from_fn(shape, |_| if rng.unit() < 0.5 { rng.uniform(0.0, 3e-3) } else { 0.0 }),
        qr: Field3::from_fn(shape, |_| if rng.unit() < 0.5 { rng.uniform(0.0, 4e-3) } else { 0.0 }),
        p,
        rho,
    };
    let mut s = State {
        t: state.t.clone(),
        qv: state.qv.clone(),
        qc: state.qc.clone(),
        qr: state.qr.clone(),
        p: state.p.clone(),
        rho: state.rho.clone(),
    };
    let mut out = Field3::filled(shape, f64::NAN);
    Loop3D::interior(&shape)
        .run(WarmRain, (dt, dz, &s.p, &s.rho, &mut s.t, &mut s.qv, &mut s.qc, &mut s.qr, &mut out))
        .unwrap();
    let before = column_water(&state, dz);
    let after = column_water(&s, dz);
    for i in 0..n[0] {
        for j in 0..n[1] {
            let col = |f: &Field3<f64>| (0..n[2]).map(|k| at(f, i, j, k)).collect::<Vec<_>>();
            let (mut t, mut qv, mut qc, mut qr) = (col(&state.t), col(&state.qv), col(&state.qc), col(&state.qr));
            let mut flux = vec![0.0; n[2]];
            warm_rain_column(dt, dz, &col(&state.p), &col(&state.rho), &mut t, &mut qv, &mut qc, &mut qr, &mut flux);
            for (name, want, got) in
                [("t", &t, &s.t), ("qv", &qv, &s.qv), ("qc", &qc, &s.qc), ("qr", &qr, &s.qr), ("flux", &flux, &out)]
            {
                for (k, w) in want.iter().enumerate() {
                    assert_eq!(at(got, i, j, k).to_bits(), w.to_bits(), "{name} at ({i},{j},{k})");
                }
            }
            // The water that left through the bottom is the bottom level's flux times dt.
            let budget = after[i][j] + dt * at(&out, i, j, 0);
            assert!(
                (budget - before[i][j]).abs() <= 1e-13 * before[i][j],
                "column ({i},{j}): {} -> {budget}",
                before[i][j]
            );
        }
    }
}

#[test]
fn a_moist_bubble_rains_and_every_column_keeps_its_water() {
    let (n, dz, dt) = ([24, 20, 40], 100.0, 5.0);
    let initial = moist_bubble(n, dz);
    let mut model = Column::new(&Host, &initial, 20.0, dz).unwrap();
    let mut rained = vec![vec![0.0; n[1]]; n[0]];
    for _ in 0..240 {
        model.step(&Host, dt).unwrap();
        for (i, row) in rained.iter_mut().enumerate() {
            for (j, r) in row.iter_mut().enumerate() {
                *r += dt * at(&model.rain_out, i, j, 0);
            }
        }
    }
    let start = column_water(&initial, dz);
    let end = column_water(&model.state, dz);
    let mut total_rain = 0.0f64;
    for i in 0..n[0] {
        for j in 0..n[1] {
            let budget = end[i][j] + rained[i][j];
            assert!(
                (budget - start[i][j]).abs() <= 1e-11 * start[i][j],
                "column ({i},{j}): {} -> {budget}",
                start[i][j]
            );
            total_rain += rained[i][j];
        }
    }
    let max_cloud = model.state.qc.to_vec().into_iter().fold(0.0f64, f64::max);
    assert!(
        total_rain > 0.0 && max_cloud > 0.0,
        "the bubble should make cloud and rain: rain {total_rain}, cloud {max_cloud}"
    );
    assert!(model.state.t.to_vec().iter().all(|v| v.is_finite() && *v > 150.0 && *v < 350.0));
    // Columns far from the bubble stay dry.
    assert_eq!(rained[0][0], 0.0);
}
