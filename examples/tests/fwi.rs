//! The fwi3d example's inversion (`stencil_examples::fwi`) at a small size: the dot-product test
//! of the whole propagator (wavelet to traces, through the injection, the generated adjoint
//! stencils and the receivers' transpose), the Taylor test of the gradient, checkpointed against
//! stored and two host subdomains against one (bit for bit), and a few descent iterations; with
//! `cuda`, the gradient on a GPU and the Taylor test on two GPU subdomains against the host's bits.

use stencil_examples::fwi::{misfit_of, Fwi, Survey, Traces};
use stencil_runtime::revolve::{Held, Schedule};
use stencil_runtime::{Distributed, Executor, Field3, Host};

/// 16³ physical points in a sponge of 4 (24³ interior), two shots, 50 receivers.
fn survey() -> Survey {
    let mut s = Survey::transmission(16, 110, 2);
    s.sponge = 4;
    s.mute = 2;
    s
}

/// A deterministic generator (splitmix64), uniform in `[-1, 1)`.
fn uniform(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    2.0 * (((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64) - 1.0
}

fn bits(f: &Field3<f64>) -> Vec<u64> {
    f.to_vec().iter().map(|x| x.to_bits()).collect()
}

fn dot(a: &Field3<f64>, b: &Field3<f64>) -> f64 {
    a.to_vec().iter().zip(b.to_vec()).map(|(x, y)| x * y).sum()
}

/// The gradient `∂Φ/∂m` at the starting model against the true model's data, and `Φ`.
fn gradient_on<E: Executor>(exec: &E, survey: &Survey) -> (Field3<f64>, f64) {
    let fwi = Fwi::new(exec, survey.clone()).expect("survey");
    let observed = fwi.observe(&fwi.upload(&survey.slowness(true).unwrap()).unwrap()).expect("observe");
    let m = fwi.upload(&survey.slowness(false).unwrap()).unwrap();
    let mut g = exec.alloc(survey.shape()).unwrap();
    let phi = fwi.gradient(&m, &observed, &mut g).expect("gradient");
    (exec.download(&g).unwrap(), phi)
}

#[test]
fn the_propagator_passes_the_dot_product_test() {
    let s = survey();
    let fwi = Fwi::new(&Host, s.clone()).unwrap();
    let m = fwi.upload(&s.slowness(false).unwrap()).unwrap();
    let mut seed = 0xd07;
    for shot in 0..s.shots.len() {
        // F x: random wavelet to traces; Fᵀ y: the residual y injected (zero wavelet, data −y).
        let x: Vec<f64> = (0..s.steps).map(|_| uniform(&mut seed)).collect();
        let fx = fwi.traces(&m, shot, &x).unwrap();
        let scale = fx.iter().flatten().fold(0.0, |a: f64, v| a.max(v.abs()));
        let y: Traces = fx.iter().map(|t| t.iter().map(|_| scale * uniform(&mut seed)).collect()).collect();
        let minus_y: Traces = y.iter().map(|t| t.iter().map(|v| -v).collect()).collect();
        let mut m_bar = Host.alloc(s.shape()).unwrap();
        let zero = vec![0.0; s.steps];
        let schedule = Schedule::binomial(s.steps, 7).unwrap();
        let adj = fwi.shot_gradient(&m, shot, &zero, &minus_y, &schedule, &mut m_bar, true).unwrap();
        let lhs: f64 = fx.iter().flatten().zip(y.iter().flatten()).map(|(a, b)| a * b).sum();
        let rhs: f64 = x.iter().zip(&adj.wavelet_bar).map(|(a, b)| a * b).sum();
        let err = (lhs - rhs).abs() / lhs.abs().max(rhs.abs());
        println!("shot {shot}: <F x, y> = {lhs:.15e}, <x, F^T y> = {rhs:.15e}, relative error {err:.2e}");
        assert!(err <= 1e-12, "shot {shot}: relative error {err:e}");
        assert!(lhs.abs() > 0.0);
    }
}

/// Least-squares slope of `log2 r` against `log2 h`.
fn fit(h: &[f64], r: &[f64]) -> f64 {
    let (x, y): (Vec<f64>, Vec<f64>) = h.iter().zip(r).map(|(h, r)| (h.log2(), r.log2())).unzip();
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let sxy: f64 = x.iter().zip(&y).map(|(a, b)| (a - mx) * (b - my)).sum();
    sxy / x.iter().map(|a| (a - mx).powi(2)).sum::<f64>()
}

/// The Taylor test of the gradient on `exec`: the misfit's change along `dm` against `h g·dm`
/// for h = 1/2 … 1/128, printed; the fitted slopes of the first- and second-order remainders,
/// and of the remainder with the gradient's sign flipped.
fn taylor_slopes<E: Executor>(exec: &E, s: &Survey) -> [f64; 3] {
    let fwi = Fwi::new(exec, s.clone()).unwrap();
    let (m_true, m0) = (s.slowness(true).unwrap(), s.slowness(false).unwrap());
    let observed = fwi.observe(&fwi.upload(&m_true).unwrap()).unwrap();
    let mut g = exec.alloc(s.shape()).unwrap();
    let m0_on = fwi.upload(&m0).unwrap();
    let phi0 = fwi.gradient(&m0_on, &observed, &mut g).unwrap();
    assert_eq!(phi0, fwi.misfit(&m0_on, &observed).unwrap(), "the gradient's misfit is the forward one");
    let g = exec.download(&g).unwrap();
    // dm: a tenth of the anomaly's slowness, plus a smooth wiggle everywhere.
    let dm = Field3::from_fn(s.shape(), |p| {
        let wiggle = ((p[0] as f64) * 0.4).sin() * ((p[1] as f64) * 0.3).cos() * ((p[2] as f64) * 0.5).sin();
        0.1 * (m_true.get(p).unwrap() - m0.get(p).unwrap()) + 2e-10 * wiggle
    });
    let slope = dot(&g, &dm);
    let h: Vec<f64> = (1..=7).map(|e| 0.5f64.powi(e)).collect();
    let (mut first, mut second, mut wrong) = (Vec::new(), Vec::new(), Vec::new());
    println!("{:>10} {:>14} {:>14} {:>14}", "h", "|dPhi|", "|dPhi - h g.dm|", "(with -g)");
    for &h in &h {
        let m = fwi.upload(&Field3::from_fn(s.shape(), |p| m0.get(p).unwrap() + h * dm.get(p).unwrap())).unwrap();
        let d = fwi.misfit(&m, &observed).unwrap() - phi0;
        first.push(d.abs());
        second.push((d - h * slope).abs());
        wrong.push((d + h * slope).abs());
        println!(
            "{h:>10.6} {:>14.6e} {:>14.6e} {:>14.6e}",
            first.last().unwrap(),
            second.last().unwrap(),
            wrong.last().unwrap()
        );
    }
    [fit(&h, &first), fit(&h, &second), fit(&h, &wrong)]
}

#[test]
fn the_gradient_passes_the_taylor_test_on_one_domain_and_on_two_subdomains() {
    let mut s = survey();
    let [s1, s2, sw] = taylor_slopes(&Host, &s);
    println!("slopes: {s1:.4} (1 expected), {s2:.4} (2 expected), with the gradient's sign flipped {sw:.4}");
    assert!((s1 - 1.0).abs() <= 0.1, "first-order slope {s1}");
    assert!((s2 - 2.0).abs() <= 0.1, "second-order slope {s2}");
    // A gradient of the wrong sign leaves a first-order remainder: the test can fail.
    assert!((sw - 2.0).abs() > 0.5, "a flipped gradient passed: slope {sw}");
    // Two subdomains (and a checkpointed reverse loop): every misfit and the gradient are the
    // single domain's bits, so the slopes are too.
    s.slots = Some(6);
    let two = Distributed::host(s.decompose(2, Some([2, 1, 1])).unwrap()).unwrap();
    let slopes = taylor_slopes(&two, &s);
    println!("two subdomains, 6 checkpoint slots: slopes {slopes:.4?}");
    assert_eq!(slopes.map(f64::to_bits), [s1, s2, sw].map(f64::to_bits), "two subdomains: the slopes differ");
}

#[test]
fn the_checkpointed_gradient_equals_the_stored_one_bit_for_bit() {
    let mut s = survey();
    let (stored, phi) = gradient_on(&Host, &s);
    assert!(stored.to_vec().iter().any(|&x| x != 0.0) && phi > 0.0);
    for slots in [3, 10] {
        s.slots = Some(slots);
        assert!(Schedule::binomial(s.steps, slots).unwrap().recomputed() > 0);
        let (g, p) = gradient_on(&Host, &s);
        assert_eq!(p.to_bits(), phi.to_bits(), "{slots} slots: the misfit");
        assert!(bits(&g) == bits(&stored), "{slots} slots: the gradient differs");
    }
}

/// The reverse time step (`FwiWaveAdjointStep`, which the gradient runs) gives the bits of the
/// accumulating adjoint run as a reverse loop would: into a zeroed field, the `u_prev` terms from
/// the cotangent two steps later, then the `u` terms from the next one's; over ranges inside, at
/// and beyond the forward range.
#[test]
fn the_adjoint_step_gives_the_accumulating_adjoints_bits() {
    use stencil_examples::fwi::{FwiWaveAdjoint, FwiWaveAdjointStep};
    use stencil_runtime::adjoint::range_mask;
    use stencil_runtime::{Loop3D, Shape3};
    let shape = Shape3::new([30, 26, 24]).halo(8);
    let mut state = 0x57e9_u64;
    let mut random = |lo: f64, hi: f64| Field3::from_fn(shape, |_| lo + (hi - lo) * uniform(&mut state));
    let (m, damp, next, later) = (random(0.5, 1.5), random(0.0, 0.3), random(-1.0, 1.0), random(-1.0, 1.0));
    let (c0, cx, cy, cz, dt2) =
        (-7.3, [1.6, -0.2, 0.025, -0.0017], [1.5, -0.21, 0.024, -0.0018], [1.4, -0.19, 0.026, -0.0016], 0.37);
    let r = Loop3D::interior(&shape).shrink([4; 3]);
    let mask = range_mask::<f64, 3>(shape, &r);
    for q in [r.shrink([3; 3]), r, r.grow([4; 3]).expect("room")] {
        let (mut want, mut scratch) = (Field3::zeros(shape), Field3::zeros(shape));
        let args = (c0, cx, cy, cz, dt2, &m, &damp, &mut scratch, &mut want, &later, &mask);
        Host.run(&q, FwiWaveAdjoint, args).unwrap();
        Host.run(&q, FwiWaveAdjoint, (c0, cx, cy, cz, dt2, &m, &damp, &mut want, &mut scratch, &next, &mask)).unwrap();
        let mut got = Field3::zeros(shape);
        Host.run(&q, FwiWaveAdjointStep, (c0, cx, cy, cz, dt2, &m, &damp, &mut got, &later, &next, &mask)).unwrap();
        assert!(bits(&got) == bits(&want), "range {q:?}: the step differs from the accumulated adjoint");
    }
}

/// The reverse time step in scaled cotangents (`FwiWaveScaledAdjointStep`, which the gradient
/// runs) is the reverse time step: with `μ = λ / ρ` on the forward range and zero outside it (`ρ`
/// from `FwiWaveCotangentScale`, `m (1 + d)` exactly), `ρ μ⁽ⁿ⁾` is `FwiWaveAdjointStep`'s `λ⁽ⁿ⁾` to
/// round-off over the forward range and a range inside it, and the step writes nothing else.
/// With `μ` not zero outside the forward range (the contract broken) it is not.
#[test]
fn the_scaled_step_is_the_adjoint_step_in_scaled_cotangents() {
    use stencil_examples::fwi::{FwiWaveAdjointStep, FwiWaveCotangentScale, FwiWaveScaledAdjointStep};
    use stencil_runtime::adjoint::range_mask;
    use stencil_runtime::{Loop3D, Shape3};
    let shape = Shape3::new([30, 26, 24]).halo(8);
    let mut state = 0x5ca1_u64;
    let mut random = |lo: f64, hi: f64| Field3::from_fn(shape, |_| lo + (hi - lo) * (uniform(&mut state) + 1.0) / 2.0);
    let (m, damp, next, later) = (random(0.5, 1.5), random(0.0, 0.3), random(-1.0, 1.0), random(-1.0, 1.0));
    let (c0, cx, cy, cz, dt2) =
        (-7.3, [1.6, -0.2, 0.025, -0.0017], [1.5, -0.21, 0.024, -0.0018], [1.4, -0.19, 0.026, -0.0016], 0.37);
    let r = Loop3D::interior(&shape).shrink([4; 3]);
    let mask = range_mask::<f64, 3>(shape, &r);
    let inside = |p: [isize; 3]| mask.get(p).unwrap() != 0.0;
    let mut rho = Field3::filled(shape, f64::NAN);
    Host.run(&r, FwiWaveCotangentScale, (c0, cx, cy, cz, dt2, &m, &damp, &mut rho)).unwrap();
    let at = |f: &Field3<f64>, p: [isize; 3]| f.get(p).unwrap();
    let exact = Field3::from_fn(shape, |p| {
        let want = at(&m, p) * (1.0 + at(&damp, p));
        f64::from(u8::from(!inside(p) || at(&rho, p).to_bits() == want.to_bits()))
    });
    assert!(exact.to_vec().iter().all(|&x| x == 1.0), "the scale is not m (1 + d) on the range");
    let scaled = |lambda: &Field3<f64>, outside: f64| {
        Field3::from_fn(shape, |p| if inside(p) { at(lambda, p) / at(&rho, p) } else { outside })
    };
    // The largest |ρ μ − λ| over `q` relative to the largest |λ| there.
    let difference = |got: &Field3<f64>, want: &Field3<f64>, q: &Loop3D| {
        let in_q = range_mask::<f64, 3>(shape, q);
        let on_q = |f: Field3<f64>| f.to_vec().into_iter().zip(in_q.to_vec()).filter(|x| x.1 != 0.0).map(|x| x.0);
        let scale = on_q(Field3::from_fn(shape, |p| at(want, p).abs())).fold(0.0, f64::max);
        let diff = Field3::from_fn(shape, |p| (at(&rho, p) * at(got, p) - at(want, p)).abs());
        (on_q(diff).fold(0.0, f64::max) / scale, scale)
    };
    let (mu_next, mu_later) = (scaled(&next, 0.0), scaled(&later, 0.0));
    for q in [r, r.shrink([3, 2, 1])] {
        let mut want = Field3::filled(shape, f64::NAN);
        Host.run(&q, FwiWaveAdjointStep, (c0, cx, cy, cz, dt2, &m, &damp, &mut want, &later, &next, &mask)).unwrap();
        let mut got = Field3::filled(shape, f64::NAN);
        Host.run(&q, FwiWaveScaledAdjointStep, (c0, cx, cy, cz, dt2, &m, &damp, &mut got, &mu_later, &mu_next))
            .unwrap();
        let (worst, scale) = difference(&got, &want, &q);
        println!("range {q:?}: largest difference {worst:.2e} of the largest cotangent {scale:.3e}");
        assert!(worst <= 1e-13, "range {q:?}: ρ μ differs from λ by {worst:e}");
        let written = Field3::from_fn(shape, |p| f64::from(u8::from(!at(&got, p).is_nan())));
        assert!(bits(&written) == bits(&range_mask::<f64, 3>(shape, &q)), "range {q:?}: written outside the range");
    }
    // The contract broken: the scaled cotangent one step later not zero outside the range.
    let mut got = Field3::filled(shape, f64::NAN);
    let broken = scaled(&next, 1.0);
    Host.run(&r, FwiWaveScaledAdjointStep, (c0, cx, cy, cz, dt2, &m, &damp, &mut got, &mu_later, &broken)).unwrap();
    let mut want = Field3::filled(shape, f64::NAN);
    Host.run(&r, FwiWaveAdjointStep, (c0, cx, cy, cz, dt2, &m, &damp, &mut want, &later, &next, &mask)).unwrap();
    let (worst, _) = difference(&got, &want, &r);
    assert!(worst > 1e-3, "a nonzero halo did not change the step near the range's boundary: {worst:e}");
}

/// Checkpoints saved to host memory ([`Held::OnHost`]: `Executor::save` and `restore`) give the
/// bits of checkpoints held on the executor, on one domain and on two host subdomains (each
/// part saved as it is), and the run reports the host memory they held.
#[test]
fn checkpoints_held_on_the_host_give_the_same_gradient() {
    let mut s = survey();
    s.slots = Some(4);
    let (on_exec, phi) = gradient_on(&Host, &s);
    s.held = Held::OnHost;
    let (on_host, p) = gradient_on(&Host, &s);
    assert_eq!(p.to_bits(), phi.to_bits(), "the misfit");
    assert!(bits(&on_host) == bits(&on_exec), "the gradient differs");
    let exec = Distributed::host(s.decompose(2, Some([1, 2, 1])).unwrap()).unwrap();
    let (two, p) = gradient_on(&exec, &s);
    assert_eq!(p.to_bits(), phi.to_bits(), "two subdomains: the misfit");
    assert!(bits(&two) == bits(&on_exec), "two subdomains: the gradient differs");
    // The memory held: 4 slots of the state's 2 fields, each field's storage once.
    let fwi = Fwi::new(&Host, s.clone()).unwrap();
    let (m, w) = (fwi.upload(&s.slowness(false).unwrap()).unwrap(), s.wavelet());
    let observed = fwi.traces(&fwi.upload(&s.slowness(true).unwrap()).unwrap(), 0, &w).unwrap();
    let mut m_bar = Host.alloc::<f64, 3>(s.shape()).unwrap();
    let schedule = fwi.schedule().unwrap();
    let run = fwi.shot_gradient(&m, 0, &w, &observed, &schedule, &mut m_bar, false).unwrap().run;
    assert_eq!(run.host_bytes, 4 * 2 * s.shape().len() * 8, "{run:?}");
}

#[test]
fn the_gradient_on_two_subdomains_equals_one_bit_for_bit() {
    let mut s = survey();
    s.slots = Some(6);
    let (one, phi) = gradient_on(&Host, &s);
    for grid in [[2, 1, 1], [1, 1, 2]] {
        let exec = Distributed::host(s.decompose(2, Some(grid)).unwrap()).unwrap();
        let (two, p) = gradient_on(&exec, &s);
        assert_eq!(p.to_bits(), phi.to_bits(), "{grid:?}: the misfit");
        assert!(bits(&two) == bits(&one), "{grid:?}: the gradient differs");
    }
}

#[test]
fn a_few_iterations_reduce_the_misfit() {
    let mut s = survey();
    s.slots = Some(8);
    let fwi = Fwi::new(&Host, s.clone()).unwrap();
    let observed = fwi.observe(&fwi.upload(&s.slowness(true).unwrap()).unwrap()).unwrap();
    let inv = fwi.invert(&s.slowness(false).unwrap(), &observed, 3, |_, _| {}).unwrap();
    println!("misfits {:?}", inv.misfits);
    assert!(inv.stopped.is_none(), "{:?}", inv.stopped);
    assert!(inv.misfits.windows(2).all(|w| w[1] < w[0]), "{:?}", inv.misfits);
    assert!(inv.misfits[3] < 0.8 * inv.misfits[0], "{:?}", inv.misfits);
    // The final model's misfit, recomputed.
    let again = fwi.misfit(&fwi.upload(&inv.model).unwrap(), &observed).unwrap();
    assert_eq!(again, inv.misfits[3]);
}

#[test]
fn bad_input_is_an_error() {
    let mut s = survey();
    s.dt *= 10.0;
    assert!(Fwi::new(&Host, s).err().unwrap().to_string().contains("unstable"));
    let mut s = survey();
    s.receivers.push([1e4, 0.0, 0.0]);
    assert!(Fwi::new(&Host, s).err().unwrap().to_string().contains("receiver"));
    let s = survey();
    let fwi = Fwi::new(&Host, s.clone()).unwrap();
    let m = fwi.upload(&s.slowness(false).unwrap()).unwrap();
    assert!(fwi.misfit(&m, &[]).is_err());
    assert!(fwi.traces(&m, 5, &s.wavelet()).is_err());
    let short: Traces = vec![vec![0.0; 50]; 3];
    assert!(misfit_of(&short, &short) == 0.0);
    assert!(fwi.misfit(&m, &[short.clone(), short]).is_err());
}

/// On a GPU, and on two subdomains on the GPUs (subdomain `i` on GPU `i % count`), the gradient
/// (checkpointed) and every misfit of the Taylor test are the host's bits, so the slopes are too.
#[cfg(feature = "cuda")]
#[test]
fn on_the_gpus_the_gradient_and_the_taylor_slopes_are_the_hosts() {
    use stencil_runtime::cuda::Gpu;
    use stencil_runtime::Domains;
    let count = Gpu::count().expect("a CUDA device");
    assert!(count > 0, "the GPU tests need a CUDA device");
    let mut s = survey();
    s.slots = Some(6);
    let (host, phi) = gradient_on(&Host, &s);
    let gpu = Gpu::new(0).unwrap();
    let (on_gpu, p) = gradient_on(&gpu, &s);
    assert_eq!(p.to_bits(), phi.to_bits(), "one GPU: the misfit");
    assert!(bits(&on_gpu) == bits(&host), "one GPU: the gradient differs from the host's");
    let d = s.decompose(2, Some([2, 1, 1])).unwrap();
    let gpus = (0..2).map(|i| Gpu::new(i % count)).collect::<Result<Vec<_>, _>>().unwrap();
    let two = Distributed::new(Domains::new(d, gpus).unwrap());
    // Checkpoints in host memory: the same bits on one GPU and on the two GPU subdomains.
    let mut h = s.clone();
    h.held = Held::OnHost;
    let (saved, p) = gradient_on(&gpu, &h);
    assert_eq!(p.to_bits(), phi.to_bits(), "one GPU, checkpoints on the host: the misfit");
    assert!(bits(&saved) == bits(&host), "one GPU, checkpoints on the host: the gradient differs");
    let (split, p) = gradient_on(&two, &h);
    assert_eq!(p.to_bits(), phi.to_bits(), "two GPU subdomains, checkpoints on the host: the misfit");
    assert!(bits(&split) == bits(&host), "two GPU subdomains, checkpoints on the host: the gradient differs");
    let slopes = taylor_slopes(&two, &s);
    let on_host = taylor_slopes(&Host, &s);
    println!("two GPU subdomains ({count} GPU(s)): slopes {slopes:.4?}, host {on_host:.4?}");
    assert_eq!(slopes.map(f64::to_bits), on_host.map(f64::to_bits), "two GPU subdomains: the slopes differ");
    assert!((slopes[0] - 1.0).abs() <= 0.1 && (slopes[1] - 2.0).abs() <= 0.1, "slopes {slopes:?}");
}

/// On a GPU, the adjoint stencil and the reverse time step under the depot kernel and under every
/// two-pass strategy (the scaled cotangents written to scratch fields first), and as tuned, give
/// the host's bits, over ranges inside the forward range, the forward range and the range grown
/// by the reach.
#[cfg(feature = "cuda")]
#[test]
fn on_a_gpu_every_adjoint_strategy_gives_the_hosts_bits() {
    use stencil_examples::fwi::{FwiWaveAdjoint, FwiWaveAdjointStep};
    use stencil_runtime::adjoint::range_mask;
    use stencil_runtime::cuda::Gpu;
    use stencil_runtime::{Loop3D, Shape3, Strategy};
    let gpu = Gpu::new(0).expect("a CUDA device");
    let shape = Shape3::new([52, 44, 40]).halo(8);
    let mut state = 0x5eed_u64;
    let mut random = |lo: f64, hi: f64| Field3::from_fn(shape, |_| lo + (hi - lo) * uniform(&mut state));
    let (m, damp) = (random(0.5, 1.5), random(0.0, 0.3));
    let (y, start_u, start_p) = (random(-1.0, 1.0), random(-1.0, 1.0), random(-1.0, 1.0));
    let later = random(-1.0, 1.0);
    let (c0, cx, cy, cz, dt2) =
        (-7.3, [1.6, -0.2, 0.025, -0.0017], [1.5, -0.21, 0.024, -0.0018], [1.4, -0.19, 0.026, -0.0016], 0.37);
    let r = Loop3D::interior(&shape).shrink([4; 3]);
    let mask = range_mask::<f64, 3>(shape, &r);
    let up = |f: &Field3<f64>| gpu.upload(f).expect("upload");
    let (dm, dd, dy, dmask, dlater) = (up(&m), up(&damp), up(&y), up(&mask), up(&later));
    let strategies = [
        Some(Strategy::Depot { block_x: 32, block_y: 8, planes: 16 }),
        Some(Strategy::TwoPass { block_x: 64, block_y: 4, points_per_thread: 16 }),
        Some(Strategy::TwoPass { block_x: 32, block_y: 4, points_per_thread: 16 }),
        Some(Strategy::TwoPass { block_x: 16, block_y: 3, points_per_thread: 5 }),
        Some(Strategy::TwoPassStream { tile_x: 32, tile_y: 8 }),
        Some(Strategy::TwoPassStream { tile_x: 16, tile_y: 5 }),
        None,
    ];
    // Inside the forward range first: there the scaled cotangents that the first pass writes
    // around the range (the point pass covers the range itself) are not zero, so a first pass
    // that missed a slab would leave the previous launch's values or fresh memory in its place.
    for q in [r.shrink([3; 3]), r, r.grow([4; 3]).expect("room"), r.shrink([1, 2, 3])] {
        let (mut hu, mut hp) = (start_u.try_clone().unwrap(), start_p.try_clone().unwrap());
        Host.run(&q, FwiWaveAdjoint, (c0, cx, cy, cz, dt2, &m, &damp, &mut hu, &mut hp, &y, &mask)).unwrap();
        for strategy in strategies {
            let (mut gu, mut gp) = (up(&start_u), up(&start_p));
            let args = (c0, cx, cy, cz, dt2, &dm, &dd, &mut gu, &mut gp, &dy, &dmask);
            gpu.run_with(&q, FwiWaveAdjoint, strategy, args).expect("the adjoint on the GPU");
            let label = strategy.map_or("tuned".to_string(), |s| s.label());
            assert!(
                bits(&gpu.download(&gu).unwrap()) == bits(&hu),
                "{label}, range {q:?}: u_bar differs from the host's"
            );
            assert!(bits(&gpu.download(&gp).unwrap()) == bits(&hp), "{label}, range {q:?}: u_prev_bar differs");
        }
        // The reverse time step, its output poisoned first (a point of the range left unwritten
        // keeps NaN's bits).
        let mut hs = Field3::filled(shape, f64::NAN);
        Host.run(&q, FwiWaveAdjointStep, (c0, cx, cy, cz, dt2, &m, &damp, &mut hs, &later, &y, &mask)).unwrap();
        for strategy in strategies {
            let mut gs = up(&Field3::filled(shape, f64::NAN));
            let args = (c0, cx, cy, cz, dt2, &dm, &dd, &mut gs, &dlater, &dy, &dmask);
            gpu.run_with(&q, FwiWaveAdjointStep, strategy, args).expect("the adjoint step on the GPU");
            let label = strategy.map_or("tuned".to_string(), |s| s.label());
            assert!(bits(&gpu.download(&gs).unwrap()) == bits(&hs), "{label}, range {q:?}: the step differs");
        }
    }
}

/// On a GPU, the reverse time step in scaled cotangents under every strategy the tuner tries (and
/// as tuned), the scale and the scaled gradient give the host's bits, over the forward range and a
/// range inside it, each output poisoned first.
#[cfg(feature = "cuda")]
#[test]
fn on_a_gpu_the_scaled_step_and_gradient_give_the_hosts_bits() {
    use stencil_examples::fwi::{FwiWaveCotangentScale, FwiWaveScaledAdjointStep, FwiWaveScaledGradient};
    use stencil_runtime::adjoint::range_mask;
    use stencil_runtime::cuda::Gpu;
    use stencil_runtime::{Loop3D, Shape3, Stencil};
    let gpu = Gpu::new(0).expect("a CUDA device");
    let shape = Shape3::new([52, 44, 40]).halo(8);
    let mut state = 0x5ca1ed_u64;
    let mut random = |lo: f64, hi: f64| Field3::from_fn(shape, |_| lo + (hi - lo) * (uniform(&mut state) + 1.0) / 2.0);
    let (m, damp, u, u_prev) = (random(0.5, 1.5), random(0.0, 0.3), random(-1.0, 1.0), random(-1.0, 1.0));
    let (c0, cx, cy, cz, dt2) =
        (-7.3, [1.6, -0.2, 0.025, -0.0017], [1.5, -0.21, 0.024, -0.0018], [1.4, -0.19, 0.026, -0.0016], 0.37);
    let r = Loop3D::interior(&shape).shrink([4; 3]);
    let mask = range_mask::<f64, 3>(shape, &r);
    let (a, b) = (random(-1.0, 1.0), random(-1.0, 1.0));
    let zero_outside = |f: &Field3<f64>| Field3::from_fn(shape, |p| f.get(p).unwrap() * mask.get(p).unwrap());
    let (mu_a, mu_b) = (zero_outside(&a), zero_outside(&b));
    let up = |f: &Field3<f64>| gpu.upload(f).expect("upload");
    let (dm, dd, du, dp, dmask, da, db) = (up(&m), up(&damp), up(&u), up(&u_prev), up(&mask), up(&mu_a), up(&mu_b));
    let mut rho = Field3::filled(shape, f64::NAN);
    Host.run(&r, FwiWaveCotangentScale, (c0, cx, cy, cz, dt2, &m, &damp, &mut rho)).unwrap();
    let mut drho = up(&Field3::filled(shape, f64::NAN));
    gpu.run(&r, FwiWaveCotangentScale, (c0, cx, cy, cz, dt2, &dm, &dd, &mut drho)).unwrap();
    assert!(bits(&gpu.download(&drho).unwrap()) == bits(&rho), "the scale differs from the host's");
    let ir = <FwiWaveScaledAdjointStep as Stencil<3>>::source_ir();
    let strategies: Vec<_> =
        stencil_runtime::tuning::candidates(ir, r.len_per_axis(), 2).into_iter().map(Some).chain([None]).collect();
    assert!(strategies.len() > 3, "the tuner tries several strategies");
    for q in [r, r.shrink([1, 2, 3])] {
        let mut hs = Field3::filled(shape, f64::NAN);
        Host.run(&q, FwiWaveScaledAdjointStep, (c0, cx, cy, cz, dt2, &m, &damp, &mut hs, &mu_a, &mu_b)).unwrap();
        for &strategy in &strategies {
            let mut gs = up(&Field3::filled(shape, f64::NAN));
            let args = (c0, cx, cy, cz, dt2, &dm, &dd, &mut gs, &da, &db);
            gpu.run_with(&q, FwiWaveScaledAdjointStep, strategy, args).expect("the scaled step on the GPU");
            let label = strategy.map_or("tuned".to_string(), |s| s.label());
            assert!(bits(&gpu.download(&gs).unwrap()) == bits(&hs), "{label}, range {q:?}: the scaled step differs");
        }
        let mut hg = zero_outside(&a);
        Host.run(&q, FwiWaveScaledGradient, (c0, cx, cy, cz, dt2, &m, &damp, &u, &u_prev, &mu_b, &mut hg, &rho, &mask))
            .unwrap();
        let mut gg = up(&zero_outside(&a));
        let args = (c0, cx, cy, cz, dt2, &dm, &dd, &du, &dp, &db, &mut gg, &drho, &dmask);
        gpu.run(&q, FwiWaveScaledGradient, args).expect("the scaled gradient on the GPU");
        assert!(bits(&gpu.download(&gg).unwrap()) == bits(&hg), "range {q:?}: the scaled gradient differs");
    }
}
