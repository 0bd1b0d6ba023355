//! `#[stencil(portable_math)]`: `exp`, `exp2`, `ln`, `log2`, `log10` and `powf` computed by the
//! stencil's own arithmetic. On the host they are checked against the platform's library (a few
//! units in the last place apart, the special values equal); on a GPU every strategy gives the
//! host's bits.

use stencil_runtime::prelude::*;

#[stencil(portable_math)]
fn logs_and_exps(
    idx: Idx3,
    x: &Field3<f64>,
    y: &Field3<f64>,
    e: &mut Field3<f64>,
    e2: &mut Field3<f64>,
    l: &mut Field3<f64>,
    l2: &mut Field3<f64>,
    l10: &mut Field3<f64>,
    p: &mut Field3<f64>,
) {
    let (a, b) = (x[idx], y[idx]);
    e[idx] = a.exp();
    e2[idx] = a.exp2();
    l[idx] = a.ln();
    l2[idx] = a.log2();
    l10[idx] = a.log10();
    p[idx] = a.powf(b);
}

/// The same in f32 (computed in f64, rounded once).
#[stencil(portable_math)]
fn pow32(idx: Idx3, x: &Field3<f32>, y: &Field3<f32>, p: &mut Field3<f32>, e: &mut Field3<f32>) {
    p[idx] = x[idx].powf(y[idx]);
    e[idx] = x[idx].exp();
}

/// A stencil whose `powf` reads neighbours, as an equation of state does.
#[stencil(portable_math)]
fn eos(idx: Idx3, p0: f64, gamma: f64, rt: &Field3<f64>, p: &mut Field3<f64>) {
    let mean = 0.5 * (rt[idx] + rt[idx.ix::<1, 0, 0>()]);
    p[idx] = p0 * (mean / p0).powf(gamma);
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Inputs: special values first, then random magnitudes over the whole range of f64.
fn inputs(shape: Shape3, seed: u64) -> (Field3<f64>, Field3<f64>) {
    let special = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.0,
        0.5,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MIN_POSITIVE,
        f64::MIN_POSITIVE / 1024.0,
        5e-324,
        f64::MAX,
        709.782712893384,
        709.79,
        -745.13,
        -708.5,
        1e-300,
        3.0,
        -3.0,
        0.1,
        std::f64::consts::SQRT_2,
        std::f64::consts::FRAC_1_SQRT_2,
        1.0 - f64::EPSILON,
        1.0 + f64::EPSILON,
    ];
    let mut rng = Rng(seed);
    let mut n = 0usize;
    let values = |rng: &mut Rng, n: &mut usize| {
        let v = if *n < special.len() * special.len() {
            special[*n % special.len()]
        } else {
            let sign = if rng.next() < 0.2 { -1.0 } else { 1.0 };
            match *n % 3 {
                0 => sign * 2f64.powf(rng.next() * 2000.0 - 1000.0),
                1 => sign * (rng.next() * 1400.0 - 700.0),
                _ => sign * rng.next() * 4.0,
            }
        };
        *n += 1;
        v
    };
    let x = Field3::from_fn(shape, |_| values(&mut rng, &mut n));
    let mut m = 0usize;
    let mut rng2 = Rng(seed ^ 0x5eed);
    let y = Field3::from_fn(shape, |_| {
        let v = if m < special.len() * special.len() {
            special[m / special.len()]
        } else {
            match m % 3 {
                0 => (rng2.next() * 20.0 - 10.0).round(),
                1 => rng2.next() * 6.0 - 3.0,
                _ => rng2.next() * 0.2,
            }
        };
        m += 1;
        v
    });
    (x, y)
}

/// Units in the last place between `a` and `b` (0 for equal values, both NaN or equal
/// infinities; `u64::MAX` for a NaN against a number or different signs of infinity).
fn ulps(a: f64, b: f64) -> u64 {
    if a.is_nan() && b.is_nan() || a == b {
        return 0;
    }
    if a.is_nan() || b.is_nan() || a.is_infinite() || b.is_infinite() || a.signum() != b.signum() {
        return u64::MAX;
    }
    a.to_bits().abs_diff(b.to_bits())
}

fn run(exec: &impl Executor, x: &Field3<f64>, y: &Field3<f64>) -> [Field3<f64>; 6] {
    let shape = *x.shape();
    let range = Loop3D::interior(&shape);
    let (dx, dy) = (exec.upload(x).expect("x"), exec.upload(y).expect("y"));
    let mut out: Vec<_> = (0..6).map(|_| exec.upload(&Field3::filled(shape, -7.0)).expect("out")).collect();
    let [e, e2, l, l2, l10, p] = &mut out[..] else { unreachable!() };
    exec.run(&range, LogsAndExps, (&dx, &dy, e, e2, l, l2, l10, p)).expect("run");
    std::array::from_fn(|k| exec.download(&out[k]).expect("download"))
}

#[test]
fn portable_functions_are_within_a_few_ulps_of_the_platform_library() {
    let shape = Shape3::new([40, 30, 20]);
    let (x, y) = inputs(shape, 7);
    let out = run(&Host, &x, &y);
    let names = ["exp", "exp2", "ln", "log2", "log10", "powf"];
    let reference: [fn(f64, f64) -> f64; 6] =
        [|a, _| a.exp(), |a, _| a.exp2(), |a, _| a.ln(), |a, _| a.log2(), |a, _| a.log10(), |a, b| a.powf(b)];
    let (xs, ys) = (x.to_vec(), y.to_vec());
    for (k, name) in names.iter().enumerate() {
        let mut worst = (0u64, 0.0, 0.0);
        let got_all = out[k].to_vec();
        for (i, (a, b)) in xs.iter().zip(&ys).enumerate() {
            let (got, want) = (got_all[i], reference[k](*a, *b));
            // powf's error grows with |y ln x| (the rounding of y ln x, amplified by exp).
            let allowed = if k == 5 { 4u64.saturating_add(((b * a.abs().ln()).abs() * 2.0) as u64) } else { 4 };
            let d = ulps(got, want);
            // Results in the subnormal range carry fewer bits: compare them absolutely.
            let subnormal = want.abs() < f64::MIN_POSITIVE && (got - want).abs() <= 4.0 * 5e-324;
            assert!(
                d <= allowed || subnormal,
                "{name}({a:e}, {b:e}): {got:e} ({:#x}) against the library's {want:e} ({:#x}): {d} ulps",
                got.to_bits(),
                want.to_bits()
            );
            if d != u64::MAX && d > worst.0 && !subnormal {
                worst = (d, *a, *b);
            }
        }
        eprintln!("{name}: at most {} ulps from the platform's library (at {:e}, {:e})", worst.0, worst.1, worst.2);
    }
}

#[test]
fn f32_and_neighbour_reads_follow_the_same_path() {
    let shape = Shape3::new([16, 8, 4]).halo(1);
    let mut rng = Rng(3);
    let x = Field3::from_fn(shape, |_| (rng.next() * 40.0 - 20.0) as f32);
    let y = Field3::from_fn(shape, |_| (rng.next() * 4.0 - 2.0) as f32);
    let (mut p, mut e) = (Field3::filled(shape, -7.0f32), Field3::filled(shape, -7.0f32));
    let range = Loop3D::interior(&shape);
    Host.run(&range, Pow32, (&x, &y, &mut p, &mut e)).expect("run");
    let points = || (0..16isize).flat_map(|i| (0..8isize).flat_map(move |j| (0..4isize).map(move |k| [i, j, k])));
    for i in points() {
        let (a, b) = (x.get(i).unwrap(), y.get(i).unwrap());
        let want_p = (a as f64).powf(b as f64) as f32;
        let want_e = (a as f64).exp() as f32;
        let (got_p, got_e) = (p.get(i).unwrap(), e.get(i).unwrap());
        assert!(got_p.to_bits().abs_diff(want_p.to_bits()) <= 1 || (got_p.is_nan() && want_p.is_nan()), "{a}^{b}");
        assert!(got_e.to_bits().abs_diff(want_e.to_bits()) <= 1, "exp({a}): {got_e} against {want_e}");
    }
    let rt = Field3::from_fn(shape, |_| 8.0e4 + rng.next() * 4.0e4);
    let mut p = Field3::filled(shape, -7.0);
    Host.run(&range, Eos, (1.0e5, 1.4, &rt, &mut p)).expect("eos");
    for i in points() {
        let mean = 0.5 * (rt.get(i).unwrap() + rt.get([i[0] + 1, i[1], i[2]]).unwrap());
        let want = 1.0e5 * (mean / 1.0e5).powf(1.4);
        assert!((p.get(i).unwrap() - want).abs() <= 4.0 * f64::EPSILON * want, "eos at {i:?}");
    }
}

/// Every GPU strategy computes the portable functions with the host's bits (the platform's
/// `exp` and CUDA's differ in the last bit; these do not).
#[cfg(feature = "cuda")]
#[test]
fn on_a_gpu_the_portable_functions_give_the_host_bits() {
    use stencil_runtime::cuda::Gpu;
    let gpu = Gpu::new(0).expect("a CUDA device");
    let shape = Shape3::new([40, 30, 20]);
    let (x, y) = inputs(shape, 11);
    let host = run(&Host, &x, &y);
    let bits =
        |f: &Field3<f64>| f.to_vec().iter().map(|v| if v.is_nan() { 1 } else { v.to_bits() }).collect::<Vec<_>>();
    let on_gpu = run(&gpu, &x, &y);
    for (k, (h, g)) in host.iter().zip(&on_gpu).enumerate() {
        assert_eq!(bits(h), bits(g), "function {k}: the GPU's bits differ from the host's");
    }
    let range = Loop3D::interior(&shape);
    let (dx, dy) = (gpu.upload(&x).expect("x"), gpu.upload(&y).expect("y"));
    let mut strategies = 0;
    for strategy in common::strategies() {
        let mut out: Vec<_> = (0..6).map(|_| gpu.alloc::<f64, 3>(shape).expect("out")).collect();
        let [e, e2, l, l2, l10, p] = &mut out[..] else { unreachable!() };
        gpu.run_with(&range, LogsAndExps, Some(strategy), (&dx, &dy, e, e2, l, l2, l10, p)).expect("run");
        for (k, f) in out.iter().enumerate() {
            assert_eq!(bits(&gpu.download(f).expect("download")), bits(&host[k]), "function {k}, {strategy}");
        }
        strategies += 1;
    }
    eprintln!("portable math: {strategies} strategies on the GPU give the host bits");
}

#[cfg(feature = "cuda")]
mod common;
