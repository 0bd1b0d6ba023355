//! GPU = CPU for every strategy (run on the device machine: `scripts/gpu-check`; CI has no GPU,
//! so this file builds only with `--features cuda`). Inputs are random, outputs are poisoned
//! with NaN on both sides before the run, sizes are odd, and results must agree bit for bit:
//! the kernels are compiled with `--fmad=false` and these stencils use only IEEE-exact operations
//! (+, -, *, /, sqrt, min, max, and `fma` where `#[stencil(fma)]` fuses), so any difference is a
//! bug, not rounding.
#![cfg(feature = "cuda")]

mod common;

use common::*;
use stencil_runtime::cuda::Gpu;
use stencil_runtime::prelude::*;
use stencil_runtime::{DeviceField, Element, Field, Loop, Strategy};

fn gpu() -> Gpu {
    Gpu::new(0).expect("the GPU suite needs a CUDA device")
}

/// The NVRTC the kernels are compiled with (chosen by the driver's version, or the library
/// `STENCIL_NVRTC` names), printed with `--nocapture`; with `STENCIL_EXPECT_NVRTC=<major>`, checked
/// to be of that major version, and a kernel compiled by it (no disk cache) runs.
#[test]
fn reports_the_nvrtc_it_compiles_with() {
    let g = Gpu::with_disk_cache(0, None).expect("the GPU suite needs a CUDA device");
    let info = stencil_runtime::cuda::nvrtc_info().expect("NVRTC");
    println!("kernels compiled by {info} on {g:?}");
    if let Ok(major) = std::env::var("STENCIL_EXPECT_NVRTC") {
        assert_eq!(info.version.0.to_string(), major.trim(), "{info}");
    }
    let src = "extern \"C\" __global__ void twice(float* a) { a[threadIdx.x] *= 2.0f; }";
    let (k, stats) = g.kernel_with_stats(src, "twice", &[]).expect("compiled");
    assert_eq!(stats.origin, stencil_runtime::cuda::CacheSource::Compiled);
    let shape = stencil_runtime::Shape1::new([32]);
    let a = up(&g, &Field::from_fn(shape, |[i]| i as f32));
    // SAFETY: one block of 32 threads over 32 floats.
    unsafe {
        g.launch(
            &k,
            stencil_runtime::cuda::LaunchDims { grid: [1, 1, 1], block: [32, 1, 1], shared_bytes: 0 },
            &[a.arg()],
        )
    }
    .expect("launch");
    let out = a.download().expect("download").to_vec();
    assert!(out.contains(&10.0) && out.contains(&62.0) && !out.contains(&31.0), "not doubled: {out:?}");
}

/// Compares two fields point by point (halo included) bit for bit; reports the first mismatch.
fn assert_same<T: Element, const D: usize>(what: &str, cpu: &Field<T, D>, gpu: &Field<T, D>, bits: impl Fn(T) -> u64) {
    let (a, b) = (cpu.to_vec(), gpu.to_vec());
    let mismatches = a.iter().zip(&b).filter(|(x, y)| bits(**x) != bits(**y)).count();
    if let Some(i) = a.iter().zip(&b).position(|(x, y)| bits(*x) != bits(*y)) {
        panic!(
            "{what}: {mismatches} of {} points differ; first at flat index {i}: cpu {:?} gpu {:?}",
            a.len(),
            a[i],
            b[i]
        );
    }
}

fn f32_bits(v: f32) -> u64 {
    v.to_bits() as u64
}

fn up<T: Element, const D: usize>(g: &Gpu, f: &Field<T, D>) -> DeviceField<T, D> {
    g.upload(f).expect("upload")
}

#[test]
fn diffusion_every_strategy_both_layouts_and_a_sub_range() {
    let g = gpu();
    let mut rng = Rng(1);
    for order in [Order::Ijk, Order::Kij] {
        let shape = Shape3::new([45, 23, 19]).halo(1).order(order);
        for (ri, range) in [Loop3D::interior(&shape), Loop3D::new(47, 3, 2, 25, 1, 5, 21, 2, 1)].into_iter().enumerate()
        {
            let f = random(shape, &mut rng, |v| v as f32);
            let c = [0.11f32, 0.12, 0.13, 0.14, 0.15, 0.16, 0.17];
            let mut cpu = Field3::filled(shape, f32::NAN);
            range.run(Diffusion, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &f, &mut cpu)).unwrap();
            let df = up(&g, &f);
            for s in strategies() {
                let mut dout = up(&g, &Field3::filled(shape, f32::NAN));
                range
                    .with_strategy(s)
                    .run_on(&g, Diffusion, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &df, &mut dout))
                    .unwrap();
                assert_same(&format!("diffusion {order:?} range {ri} {s}"), &cpu, &dout.download().unwrap(), f32_bits);
            }
        }
    }
}

#[test]
fn star25_every_strategy() {
    let g = gpu();
    let mut rng = Rng(2);
    let shape = Shape3::new([41, 29, 23]).halo(4);
    let (u, up_, v2) = (
        random(shape, &mut rng, |v| v as f32),
        random(shape, &mut rng, |v| v as f32),
        random(shape, &mut rng, |v| (v * v) as f32),
    );
    let range = Loop3D::interior(&shape);
    let mut cpu = Field3::filled(shape, f32::NAN);
    range.run(Star25, (0.3, &u, &up_, &v2, &mut cpu)).unwrap();
    let (du, dup, dv) = (up(&g, &u), up(&g, &up_), up(&g, &v2));
    for s in strategies() {
        let mut dout = up(&g, &Field3::filled(shape, f32::NAN));
        range.with_strategy(s).run_on(&g, Star25, (0.3, &du, &dup, &dv, &mut dout)).unwrap();
        assert_same(&format!("star25 {s}"), &cpu, &dout.download().unwrap(), f32_bits);
    }
}

/// `#[stencil(fma)]`: the products fused into `fma` on the GPU and into FMA instructions (or
/// software, on the scalar level) on the CPU: the same bits, every strategy, f32 and f64.
#[test]
fn fused_stencils_every_strategy() {
    let g = gpu();
    let mut rng = Rng(12);
    for order in [Order::Ijk, Order::Kij] {
        let shape = Shape3::new([45, 23, 19]).halo(1).order(order);
        let f = random(shape, &mut rng, |v| v as f32);
        let c = [0.11f32, -0.12, 0.13, 0.14, -0.15, 0.16, 0.37];
        let range = Loop3D::interior(&shape);
        let mut cpu = Field3::filled(shape, f32::NAN);
        range.run(DiffusionFma, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &f, &mut cpu)).unwrap();
        let mut plain = Field3::filled(shape, f32::NAN);
        range.run(Diffusion, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &f, &mut plain)).unwrap();
        assert!(cpu.as_slice().iter().zip(plain.as_slice()).any(|(a, b)| a.to_bits() != b.to_bits()), "fused = plain");
        let df = up(&g, &f);
        for s in strategies() {
            let mut dout = up(&g, &Field3::filled(shape, f32::NAN));
            let args = (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &df, &mut dout);
            range.with_strategy(s).run_on(&g, DiffusionFma, args).unwrap();
            assert_same(&format!("diffusion fma {order:?} {s}"), &cpu, &dout.download().unwrap(), f32_bits);
        }
    }
    let shape = Shape3::new([41, 29, 23]).halo(4);
    let (u, up_, v2) =
        (random(shape, &mut rng, |v| v), random(shape, &mut rng, |v| v), random(shape, &mut rng, |v| v * v));
    let range = Loop3D::interior(&shape);
    let to32 = |f: &Field3<f64>| Field3::from_fn(*f.shape(), |g| f.get(g).unwrap() as f32);
    let (u32_, up32, v32) = (to32(&u), to32(&up_), to32(&v2));
    let mut cpu = Field3::filled(shape, f32::NAN);
    range.run(Star25Fma, (0.3, &u32_, &up32, &v32, &mut cpu)).unwrap();
    let mut cpu64 = Field3::filled(shape, f64::NAN);
    range.run(Star25F64Fma, (0.3, &u, &up_, &v2, &mut cpu64)).unwrap();
    let (du, dup, dv) = (up(&g, &u32_), up(&g, &up32), up(&g, &v32));
    let (du64, dup64, dv64) = (up(&g, &u), up(&g, &up_), up(&g, &v2));
    for s in strategies() {
        let mut dout = up(&g, &Field3::filled(shape, f32::NAN));
        range.with_strategy(s).run_on(&g, Star25Fma, (0.3, &du, &dup, &dv, &mut dout)).unwrap();
        assert_same(&format!("star25 fma {s}"), &cpu, &dout.download().unwrap(), f32_bits);
        let mut dout = up(&g, &Field3::filled(shape, f64::NAN));
        range.with_strategy(s).run_on(&g, Star25F64Fma, (0.3, &du64, &dup64, &dv64, &mut dout)).unwrap();
        assert_same(&format!("star25 f64 fma {s}"), &cpu64, &dout.download().unwrap(), f64::to_bits);
    }
}

/// The 25-point star (reach 4, a tile halo of 2 vectors of 2 lanes or 4 of 1) over ranges starting
/// at every offset of a 128-byte line: the 2.5D tile's threads before the range load its left halo.
#[test]
fn star25_ranges_starting_anywhere_in_a_line() {
    let g = gpu();
    let mut rng = Rng(22);
    let strategies = [
        stencil_runtime::Strategy::Stream25D { tile_x: 32, tile_y: 8 },
        stencil_runtime::Strategy::Stream25D { tile_x: 16, tile_y: 5 },
        stencil_runtime::Strategy::ZMarch { block_x: 32, block_y: 4, points_per_thread: 8 },
    ];
    for order in [Order::Ijk, Order::Kij] {
        let long = |a: usize| if order == Order::Ijk { a == 0 } else { a == 2 };
        let shape = Shape3::new(std::array::from_fn(|a| if long(a) { 83 } else { 11 })).halo(4).order(order);
        let (u, up_, v2) = (
            random(shape, &mut rng, |v| v as f32),
            random(shape, &mut rng, |v| v as f32),
            random(shape, &mut rng, |v| (v * v) as f32),
        );
        let (du, dup, dv) = (up(&g, &u), up(&g, &up_), up(&g, &v2));
        for begin in 0..36 {
            let len = 1 + (begin * 11 + 3) % 45;
            let n = shape.extent();
            let i0: [usize; 3] = std::array::from_fn(|a| if long(a) { 4 + begin } else { 4 });
            let i1: [usize; 3] = std::array::from_fn(|a| if long(a) { n[a] - 4 - begin - len } else { 5 });
            let range = Loop3D::from_parts(n, i0, i1);
            let mut cpu = Field3::filled(shape, f32::NAN);
            range.run(Star25, (0.3, &u, &up_, &v2, &mut cpu)).unwrap();
            for s in strategies {
                let mut dout = up(&g, &Field3::filled(shape, f32::NAN));
                range.with_strategy(s).run_on(&g, Star25, (0.3, &du, &dup, &dv, &mut dout)).unwrap();
                let what = format!("star25 {order:?} from {begin}, {len} points, {s}");
                assert_same(&what, &cpu, &dout.download().unwrap(), f32_bits);
            }
        }
    }
}

#[test]
fn multi_output_branches_every_strategy_both_layouts() {
    let g = gpu();
    let mut rng = Rng(3);
    for order in [Order::Ijk, Order::Kij] {
        let shape = Shape3::new([37, 17, 13]).halo(1).order(order);
        let (a, b) = (random(shape, &mut rng, |v| v as f32), random(shape, &mut rng, |v| v as f32));
        let range = Loop3D::interior(&shape);
        for flip in [false, true] {
            let (mut lo, mut hi) = (Field3::filled(shape, f32::NAN), Field3::filled(shape, f32::NAN));
            range.run(Branchy, (0.9, flip, &a, &b, &mut lo, &mut hi)).unwrap();
            let (da, db) = (up(&g, &a), up(&g, &b));
            for s in strategies() {
                let (mut dlo, mut dhi) =
                    (up(&g, &Field3::filled(shape, f32::NAN)), up(&g, &Field3::filled(shape, f32::NAN)));
                range.with_strategy(s).run_on(&g, Branchy, (0.9, flip, &da, &db, &mut dlo, &mut dhi)).unwrap();
                assert_same(&format!("branchy lo {order:?} flip {flip} {s}"), &lo, &dlo.download().unwrap(), f32_bits);
                assert_same(&format!("branchy hi {order:?} flip {flip} {s}"), &hi, &dhi.download().unwrap(), f32_bits);
            }
        }
    }
}

#[test]
fn f64_stencil_every_strategy() {
    let g = gpu();
    let mut rng = Rng(4);
    let shape = Shape3::new([33, 21, 17]).halo_per_axis([1, 1, 2]);
    let f = random(shape, &mut rng, |v| v);
    let range = Loop3D::interior(&shape);
    let mut cpu = Field3::filled(shape, f64::NAN);
    range.run(DiffusionF64, (0.1, &f, &mut cpu)).unwrap();
    let df = up(&g, &f);
    for s in strategies() {
        let mut dout = up(&g, &Field3::filled(shape, f64::NAN));
        range.with_strategy(s).run_on(&g, DiffusionF64, (0.1, &df, &mut dout)).unwrap();
        assert_same(&format!("f64 {s}"), &cpu, &dout.download().unwrap(), f64::to_bits);
    }
}

#[test]
fn euler_flux_with_helpers_every_strategy_both_layouts() {
    let g = gpu();
    let mut rng = Rng(5);
    for order in [Order::Ijk, Order::Kij] {
        let shape = Shape3::new([35, 19, 13]).halo(2).order(order);
        let q = euler_state(shape, || 0.5 * (rng.next() + 1.0));
        let [rho, mx, my, mz, e] = &q;
        let range = Loop3D::interior(&shape);
        let mut cpu: [Field3<f64>; 5] = std::array::from_fn(|_| Field3::filled(shape, f64::NAN));
        let [c0, c1, c2, c3, c4] = &mut cpu;
        range.run(EulerFluxX, (1.4, rho, mx, my, mz, e, c0, c1, c2, c3, c4)).unwrap();
        let [drho, dmx, dmy, dmz, de] = q.each_ref().map(|f| up(&g, f));
        for s in strategies() {
            let mut dout: [DeviceField<f64, 3>; 5] = std::array::from_fn(|_| up(&g, &Field3::filled(shape, f64::NAN)));
            let [d0, d1, d2, d3, d4] = &mut dout;
            range
                .with_strategy(s)
                .run_on(&g, EulerFluxX, (1.4, &drho, &dmx, &dmy, &dmz, &de, d0, d1, d2, d3, d4))
                .unwrap();
            for (v, d) in dout.iter().enumerate() {
                assert_same(&format!("euler flux {v} {order:?} {s}"), &cpu[v], &d.download().unwrap(), f64::to_bits);
            }
        }
    }
}

#[test]
fn stencil_2d_every_strategy_both_layouts() {
    let g = gpu();
    let mut rng = Rng(5);
    for order in [Order::Ijk, Order::Kij] {
        let shape = Shape2::new([67, 45]).halo(1).order(order);
        let (u, rhs) = (random(shape, &mut rng, |v| v as f32), random(shape, &mut rng, |v| v as f32));
        let range = Loop2D::interior(&shape);
        let mut cpu = Field2::filled(shape, f32::NAN);
        range.run(Jacobi2d, (0.8, &u, &rhs, &mut cpu)).unwrap();
        let (du, drhs) = (up(&g, &u), up(&g, &rhs));
        for s in strategies() {
            let mut dout = up(&g, &Field2::filled(shape, f32::NAN));
            range.with_strategy(s).run_on(&g, Jacobi2d, (0.8, &du, &drhs, &mut dout)).unwrap();
            assert_same(&format!("2d {order:?} {s}"), &cpu, &dout.download().unwrap(), f32_bits);
        }
    }
}

#[test]
fn default_strategy_and_launch_errors_on_device() {
    let g = gpu();
    let mut rng = Rng(6);
    let shape = Shape3::new([20, 20, 20]).halo(1);
    let f = random(shape, &mut rng, |v| v as f32);
    let mut cpu = Field3::filled(shape, f32::NAN);
    let range = Loop3D::interior(&shape);
    range.run(Star25, (0.1, &f, &f, &f, &mut cpu)).expect_err("halo 1 is too narrow for radius 4 on the host");
    let df = up(&g, &f);
    let mut dout = up(&g, &Field3::filled(shape, f32::NAN));
    let err = range.run_on(&g, Star25, (0.1, &df, &df, &df, &mut dout)).expect_err("and on the device");
    assert!(err.to_string().contains("halo of at least 4"), "{err}");
    assert!(dout.download().unwrap().to_vec().iter().all(|v| v.is_nan()), "a refused launch wrote the output");
    range.run(Diffusion, (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4, &f, &mut cpu)).unwrap();
    range.run_on(&g, Diffusion, (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4, &df, &mut dout)).unwrap();
    assert_same("default strategy", &cpu, &dout.download().unwrap(), f32_bits);
}

/// `DeviceField::fill_halo` writes what `Field::fill_halo` writes (itself checked against an
/// independent reference in `halo.rs`): every fill, every axis, 1D to 3D, both orders, uneven
/// halos; f32 and f64.
#[test]
fn halo_fills_match_the_host() {
    use stencil_runtime::HaloFill;
    let g = gpu();
    let mut rng = Rng(7);
    let fills = [HaloFill::Periodic, HaloFill::ZeroGradient, HaloFill::Mirror, HaloFill::MirrorNegated];
    for order in [Order::Ijk, Order::Kij] {
        let s3 = Shape3::new([13, 6, 9]).halo_per_axis([2, 3, 1]).order(order);
        let s2 = Shape2::new([11, 5]).halo_per_axis([3, 2]).order(order);
        let s1 = Shape1::new([7]).halo(4);
        for fill in fills {
            for axis in 0..3 {
                let host = random(s3, &mut rng, |v| v as f32);
                let (mut cpu, mut dev) = (host.clone(), up(&g, &host));
                cpu.fill_halo(axis, fill).unwrap();
                dev.fill_halo(axis, fill).unwrap();
                assert_same(
                    &format!("3D f32 {order:?} {fill:?} axis {axis}"),
                    &cpu,
                    &dev.download().unwrap(),
                    f32_bits,
                );
            }
            for axis in 0..2 {
                let host = random(s2, &mut rng, |v| v);
                let (mut cpu, mut dev) = (host.clone(), up(&g, &host));
                cpu.fill_halo(axis, fill).unwrap();
                dev.fill_halo(axis, fill).unwrap();
                assert_same(
                    &format!("2D f64 {order:?} {fill:?} axis {axis}"),
                    &cpu,
                    &dev.download().unwrap(),
                    f64::to_bits,
                );
            }
            let host = random(s1, &mut rng, |v| v);
            let (mut cpu, mut dev) = (host.clone(), up(&g, &host));
            cpu.fill_halo(0, fill).unwrap();
            dev.fill_halo(0, fill).unwrap();
            assert_same(&format!("1D f64 {fill:?}"), &cpu, &dev.download().unwrap(), f64::to_bits);
        }
    }
}

/// Point functions on the GPU (the inlined form, and the depot kernel's shared storage): a flux
/// difference with an upwind branch, point functions calling point functions, and functions
/// needed only away from the point (over the interior and a sub-range whose surroundings are
/// not the output's), f64, against the host's CPU nest.
#[test]
fn point_functions_every_strategy_both_layouts() {
    use stencil_tests::canonical::{FluxUpdate, Lopsided, LopsidedRing, Nested};
    let g = gpu();
    let mut rng = Rng(11);
    for order in [Order::Ijk, Order::Kij] {
        let shape = Shape3::new([37, 21, 15]).halo(2).order(order);
        let range = Loop3D::interior(&shape);
        let u = random(shape, &mut rng, |v| v);
        let v = random(shape, &mut rng, |v| v);
        let q = random(shape, &mut rng, |v| 1.0 + v.abs());
        let r = random(shape, &mut rng, |v| 0.5 + v.abs());
        let mut flux = Field3::filled(shape, f64::NAN);
        range.run(FluxUpdate, (0.3, &u, &v, &mut flux)).unwrap();
        let mut nested = Field3::filled(shape, f64::NAN);
        range.run(Nested, (1.7, &q, &r, &mut nested)).unwrap();
        let [du, dv, dq, dr] = [&u, &v, &q, &r].map(|f| up(&g, f));
        for s in strategies() {
            let mut dout = up(&g, &Field3::filled(shape, f64::NAN));
            range.with_strategy(s).run_on(&g, FluxUpdate, (0.3, &du, &dv, &mut dout)).unwrap();
            assert_same(&format!("flux_update {order:?} {s}"), &flux, &dout.download().unwrap(), f64::to_bits);
            let mut dout = up(&g, &Field3::filled(shape, f64::NAN));
            range.with_strategy(s).run_on(&g, Nested, (1.7, &dq, &dr, &mut dout)).unwrap();
            assert_same(&format!("nested {order:?} {s}"), &nested, &dout.download().unwrap(), f64::to_bits);
        }
        let wide = Shape3::new([37, 21, 15]).halo(3).order(order);
        let (u, v) = (random(wide, &mut rng, |v| v), random(wide, &mut rng, |v| v));
        let prev = random(wide, &mut rng, |v| v);
        let (du, dv) = (up(&g, &u), up(&g, &v));
        for range in [Loop3D::interior(&wide), Loop3D::interior(&wide).shrink([3, 1, 2])] {
            let mut want = prev.clone();
            range.run(Lopsided, (&u, &v, &mut want)).unwrap();
            let mut want_ring = prev.clone();
            range.run(LopsidedRing, (&u, &v, &mut want_ring)).unwrap();
            for s in strategies() {
                let mut dout = up(&g, &prev);
                range.with_strategy(s).run_on(&g, Lopsided, (&du, &dv, &mut dout)).unwrap();
                let got = dout.download().unwrap();
                assert_same(&format!("lopsided {order:?} {s} {range:?}"), &want, &got, f64::to_bits);
                let mut dout = up(&g, &prev);
                range.with_strategy(s).run_on(&g, LopsidedRing, (&du, &dv, &mut dout)).unwrap();
                let got = dout.download().unwrap();
                assert_same(&format!("lopsided_ring {order:?} {s} {range:?}"), &want_ring, &got, f64::to_bits);
            }
        }
    }
}

/// Two-pass strategies on stencils whose values are read over different boxes of offsets (one
/// first pass per box), with and without a point pass, both layouts, the interior and a
/// sub-range, over halos no wider than the stencils' reach, against the host's CPU nest.
#[test]
fn two_pass_splits_every_box_both_layouts() {
    use stencil_tests::canonical::{FluxUpdate, Lopsided, SplitBoxes, SplitBoxesSum};
    let g = gpu();
    let mut rng = Rng(13);
    let two = [
        Strategy::TwoPass { block_x: 64, block_y: 4, points_per_thread: 16 },
        Strategy::TwoPass { block_x: 16, block_y: 3, points_per_thread: 5 },
        Strategy::TwoPassStream { tile_x: 32, tile_y: 8 },
        Strategy::TwoPassStream { tile_x: 16, tile_y: 5 },
    ];
    for order in [Order::Ijk, Order::Kij] {
        for halo in [2, 3] {
            let shape = Shape3::new([37, 21, 15]).halo(halo).order(order);
            let (u, v) = (random(shape, &mut rng, |v| v), random(shape, &mut rng, |v| v));
            let (du, dv) = (up(&g, &u), up(&g, &v));
            for range in [Loop3D::interior(&shape), Loop3D::interior(&shape).shrink([3, 1, 2])] {
                let check =
                    |name: &str, host: &dyn Fn(&mut Field3<f64>), dev: &dyn Fn(Strategy, &mut DeviceField<f64, 3>)| {
                        let mut want = Field3::filled(shape, f64::NAN);
                        host(&mut want);
                        for s in two {
                            let mut dout = up(&g, &Field3::filled(shape, f64::NAN));
                            dev(s, &mut dout);
                            let what = format!("{name} {order:?} halo {halo} {s} {range:?}");
                            assert_same(&what, &want, &dout.download().unwrap(), f64::to_bits);
                        }
                    };
                if halo == 2 {
                    check("split_boxes", &|w| range.run(SplitBoxes, (&u, &v, w)).unwrap(), &|s, d| {
                        range.with_strategy(s).run_on(&g, SplitBoxes, (&du, &dv, d)).unwrap()
                    });
                    check("split_boxes_sum", &|w| range.run(SplitBoxesSum, (&u, &v, w)).unwrap(), &|s, d| {
                        range.with_strategy(s).run_on(&g, SplitBoxesSum, (&du, &dv, d)).unwrap()
                    });
                    check("flux_update", &|w| range.run(FluxUpdate, (0.3, &u, &v, w)).unwrap(), &|s, d| {
                        range.with_strategy(s).run_on(&g, FluxUpdate, (0.3, &du, &dv, d)).unwrap()
                    });
                } else {
                    check("lopsided", &|w| range.run(Lopsided, (&u, &v, w)).unwrap(), &|s, d| {
                        range.with_strategy(s).run_on(&g, Lopsided, (&du, &dv, d)).unwrap()
                    });
                }
            }
        }
    }
}

/// z-marching starts its threads at the 128-byte line before a range's first point: ranges that
/// start at every offset within a line (so with 1, 2 and 4 lanes), of lengths that end anywhere
/// in one, in place and not, f32 and f64, must give the host's bits, and no point outside the
/// range may change (one thread per point, unaligned, alongside).
#[test]
fn ranges_starting_anywhere_in_a_line() {
    let g = gpu();
    let mut rng = Rng(21);
    let strategies = [
        stencil_runtime::Strategy::ZMarch { block_x: 16, block_y: 2, points_per_thread: 3 },
        stencil_runtime::Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 16 },
        stencil_runtime::Strategy::PointPerThread { block: [32, 4, 2] },
        stencil_runtime::Strategy::PointPerThread { block: [16, 2, 3] },
        stencil_runtime::Strategy::PointPerThread { block: [5, 3, 2] },
        stencil_runtime::Strategy::Stream25D { tile_x: 32, tile_y: 4 },
        stencil_runtime::Strategy::Stream25D { tile_x: 16, tile_y: 3 },
    ];
    // Ijk: the contiguous axis is i; Kij: it is k. The range moves along the contiguous axis.
    for order in [Order::Ijk, Order::Kij] {
        let long = |a: usize| if order == Order::Ijk { a == 0 } else { a == 2 };
        let extent: [usize; 3] = std::array::from_fn(|a| if long(a) { 83 } else { 6 });
        let shape = Shape3::new(extent).halo(2).order(order);
        let (u, prev) = (random(shape, &mut rng, |v| v as f32), random(shape, &mut rng, |v| v as f32));
        let du = up(&g, &u);
        let f = random(shape, &mut rng, |v| v);
        let df = up(&g, &f);
        for begin in 0..36 {
            let len = 1 + (begin * 7 + 5) % 45;
            let n = shape.extent();
            let i0: [usize; 3] = std::array::from_fn(|a| if long(a) { 2 + begin } else { 2 });
            let i1: [usize; 3] = std::array::from_fn(|a| if long(a) { n[a] - 2 - begin - len } else { 2 });
            let range = Loop3D::from_parts(n, i0, i1);
            let mut cpu = prev.clone();
            range.run(Leapfrog7, (0.1, &u, &mut cpu)).unwrap();
            let mut cpu64 = Field3::filled(shape, f64::NAN);
            range.run(DiffusionF64, (0.2, &f, &mut cpu64)).unwrap();
            for s in strategies {
                let what = format!("{order:?} from {begin}, {len} points, {s}");
                let mut dprev = up(&g, &prev);
                range.with_strategy(s).run_on(&g, Leapfrog7, (0.1, &du, &mut dprev)).unwrap();
                assert_same(&format!("leapfrog7 {what}"), &cpu, &dprev.download().unwrap(), f32_bits);
                let mut d64 = up(&g, &Field3::filled(shape, f64::NAN));
                range.with_strategy(s).run_on(&g, DiffusionF64, (0.2, &df, &mut d64)).unwrap();
                assert_same(&format!("diffusion_f64 {what}"), &cpu64, &d64.download().unwrap(), f64::to_bits);
            }
        }
    }
}

/// The non-empty boundary slabs of the interior of `shape` with these widths.
fn slabs<const D: usize>(shape: &Shape<D>, lo: [usize; D], hi: [usize; D]) -> Vec<Loop<D>> {
    let split = Loop::interior(shape).split_boundary(stencil_runtime::BoundaryWidths { lo, hi }).unwrap();
    split.boundary().map(|(_, r)| r).filter(|r| r.points() > 0).collect()
}

/// Several ranges as one launch (`Executor::run_regions`, how the distributed executor runs a
/// part's boundary slabs): the six slabs of a range (from one point thin to 32 wide, along every
/// axis), both layouts, reach 1 and 4 in 3D (rows of one and of four points per thread) and a 2D
/// stencil, against the host run over the same
/// slabs; every point outside them keeps its poison. The trace shows each fused launch. A stencil
/// with point functions and overlapping ranges run one launch per range, and give the host's
/// bits too; a slab that leaves the halo is refused before anything is written.
#[test]
fn regions_as_one_launch_equal_the_host() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("stencil::launch=trace")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let g = gpu();
        let mut rng = Rng(21);
        for order in [Order::Ijk, Order::Kij] {
            let shape = Shape3::new([45, 23, 19]).halo(1).order(order);
            let f = random(shape, &mut rng, |v| v as f32);
            let c = [0.11f32, 0.12, 0.13, 0.14, 0.15, 0.16, 0.17];
            let regions = slabs(&shape, [32, 1, 2], [1, 3, 1]);
            assert_eq!(regions.len(), 6);
            let mut cpu = Field3::filled(shape, f32::NAN);
            for r in &regions {
                r.run(Diffusion, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &f, &mut cpu)).unwrap();
            }
            let (df, mut dout) = (up(&g, &f), up(&g, &Field3::filled(shape, f32::NAN)));
            g.run_regions(&regions, Diffusion, None, (c[0], c[1], c[2], c[3], c[4], c[5], c[6], &df, &mut dout))
                .unwrap();
            assert_same(&format!("diffusion slabs {order:?}"), &cpu, &dout.download().unwrap(), f32_bits);

            // Rows of 49 points (one point per thread), and of 72 with slabs starting on 16 bytes
            // (four points per thread, the last vector of a row cut short).
            for (n, lo, hi) in [([41, 29, 23], [4, 1, 4], [8, 4, 1]), ([64, 20, 18], [4, 4, 3], [8, 1, 4])] {
                let shape = Shape3::new(n).halo(4).order(order);
                let [u, u_prev, v2] = [0, 1, 2].map(|_| random(shape, &mut rng, |v| v as f32));
                let regions = slabs(&shape, lo, hi);
                let mut cpu = Field3::filled(shape, f32::NAN);
                for r in &regions {
                    r.run(Star25, (0.3, &u, &u_prev, &v2, &mut cpu)).unwrap();
                }
                let [du, dup, dv] = [&u, &u_prev, &v2].map(|f| up(&g, f));
                let mut dout = up(&g, &Field3::filled(shape, f32::NAN));
                g.run_regions(&regions, Star25, None, (0.3, &du, &dup, &dv, &mut dout)).unwrap();
                assert_same(&format!("star25 slabs {n:?} {order:?}"), &cpu, &dout.download().unwrap(), f32_bits);
            }

            let shape = Shape2::new([67, 45]).halo(1).order(order);
            let (u, rhs) = (random(shape, &mut rng, |v| v as f32), random(shape, &mut rng, |v| v as f32));
            let regions = slabs(&shape, [32, 1], [1, 2]);
            let mut cpu = Field2::filled(shape, f32::NAN);
            for r in &regions {
                r.run(Jacobi2d, (0.8, &u, &rhs, &mut cpu)).unwrap();
            }
            let (du, drhs) = (up(&g, &u), up(&g, &rhs));
            let mut dout = up(&g, &Field2::filled(shape, f32::NAN));
            g.run_regions(&regions, Jacobi2d, None, (0.8, &du, &drhs, &mut dout)).unwrap();
            assert_same(&format!("2d slabs {order:?}"), &cpu, &dout.download().unwrap(), f32_bits);

            // Point functions: one launch per slab.
            let shape = Shape3::new([37, 21, 15]).halo(2).order(order);
            let (u, v) = (random(shape, &mut rng, |v| v), random(shape, &mut rng, |v| v));
            let regions = slabs(&shape, [2, 2, 2], [2, 2, 2]);
            let mut cpu = Field3::filled(shape, f64::NAN);
            for r in &regions {
                r.run(FluxUpdate, (0.3, &u, &v, &mut cpu)).unwrap();
            }
            let (du, dv) = (up(&g, &u), up(&g, &v));
            let mut dout = up(&g, &Field3::filled(shape, f64::NAN));
            g.run_regions(&regions, FluxUpdate, None, (0.3, &du, &dv, &mut dout)).unwrap();
            assert_same(&format!("flux_update slabs {order:?}"), &cpu, &dout.download().unwrap(), f64::to_bits);
        }
        // Overlapping ranges: one launch each, in order.
        let shape = Shape3::new([30, 20, 10]).halo(1);
        let f = random(shape, &mut rng, |v| v as f32);
        let overlapping = [Loop3D::new(32, 1, 20, 22, 1, 1, 12, 1, 1), Loop3D::new(32, 10, 1, 22, 5, 9, 12, 1, 1)];
        let mut cpu = Field3::filled(shape, f32::NAN);
        for r in &overlapping {
            r.run(Diffusion, (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4, &f, &mut cpu)).unwrap();
        }
        let (df, mut dout) = (up(&g, &f), up(&g, &Field3::filled(shape, f32::NAN)));
        g.run_regions(&overlapping, Diffusion, None, (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4, &df, &mut dout)).unwrap();
        assert_same("overlapping ranges", &cpu, &dout.download().unwrap(), f32_bits);
        // A slab that reaches past the halo: refused, nothing written.
        let mut regions = slabs(&shape, [1, 1, 1], [1, 1, 1]);
        regions.push(Loop3D::new(32, 0, 31, 22, 1, 1, 12, 1, 1));
        let mut dout = up(&g, &Field3::filled(shape, f32::NAN));
        let err = g
            .run_regions(&regions, Diffusion, None, (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4, &df, &mut dout))
            .expect_err("a range whose reach leaves the fields");
        assert!(err.to_string().contains("diffusion"), "{err}");
        assert!(dout.download().unwrap().to_vec().iter().all(|v| v.is_nan()), "a refused launch wrote the output");
    });
    let text = captured.text();
    let fused = text.lines().filter(|l| l.contains("run as one launch")).count();
    let fusing = std::env::var("STENCIL_FUSE_SLABS").map_or(true, |v| v != "0");
    assert_eq!(fused, if fusing { 8 } else { 0 }, "fused launches in the trace:\n{text}");
}

/// A point function read only ahead (at +1 and +2 along x) whose value reads two points and one
/// point back: the stencil reaches one point each way, but a first pass over the box of offsets
/// from the point itself to +2 reads two back and writes two ahead.
#[stencil]
fn read_ahead(idx: Idx3, u: &Field3<f64>, out: &mut Field3<f64>) {
    let back = |p: Idx3| 0.5 * u[p.ix::<-2, 0, 0>()] + u[p.ix::<-1, 0, 0>()];
    out[idx] = back(idx.ix::<1, 0, 0>()) - back(idx.ix::<2, 0, 0>());
}

/// A two-pass strategy whose first pass would read past the fields (a halo as wide as the
/// stencil's reach, narrower than the first pass's reads) is refused with what to change, and
/// writes nothing; the default strategy runs the same launch, and with the halo widened the
/// two-pass strategy runs it too: the host's bits in both.
#[test]
fn two_pass_refuses_a_first_pass_that_leaves_the_fields() {
    let g = gpu();
    let mut rng = Rng(31);
    let two = Strategy::TwoPass { block_x: 32, block_y: 4, points_per_thread: 8 };
    for halo in [1, 2] {
        let shape = Shape3::new([33, 9, 7]).halo_per_axis([halo, 0, 0]);
        let range = Loop3D::interior(&shape);
        let u = random(shape, &mut rng, |v| v);
        let mut want = Field3::filled(shape, f64::NAN);
        range.run(ReadAhead, (&u, &mut want)).unwrap();
        let du = up(&g, &u);
        let mut dout = up(&g, &Field3::filled(shape, f64::NAN));
        range.run_on(&g, ReadAhead, (&du, &mut dout)).unwrap();
        assert_same(&format!("read_ahead default, halo {halo}"), &want, &dout.download().unwrap(), f64::to_bits);
        let mut dout = up(&g, &Field3::filled(shape, f64::NAN));
        let ran = range.with_strategy(two).run_on(&g, ReadAhead, (&du, &mut dout));
        let got = dout.download().unwrap();
        match halo {
            1 => {
                let e = ran.expect_err("the first pass reads two points back").to_string();
                assert!(
                    e.contains("read_ahead") && e.contains("leaves the fields") && e.contains("widen the halo"),
                    "{e}"
                );
                assert!(got.to_vec().iter().all(|v| v.is_nan()), "a refused launch wrote the output");
            }
            _ => {
                ran.unwrap();
                assert_same(&format!("read_ahead two-pass, halo {halo}"), &want, &got, f64::to_bits);
            }
        }
    }
}
