//! The generated CUDA, snapshot-tested for the diffusion stencil, the 25-point star, a
//! stencil with branches and math functions, and a finite-volume Euler flux (arrays, inlined
//! `#[stencil_fn]` helpers, 5 inputs and 5 outputs, f64) under every strategy; with `--features cuda` each
//! kernel is also compiled by NVRTC for sm_90 (no GPU needed), printing registers and spills, so
//! a kernel that does not compile fails CI.

mod common;

use common::*;
use stencil_runtime::prelude::*;
use stencil_runtime::{
    cuda_boxes_kernel, cuda_first_pass_kernels, cuda_kernel, cuda_point_pass_kernel, cuda_reduce_kernel,
    cuda_steps_kernel, CudaKernel, Strategy, TimeTiling,
};

/// The CFL-type reduction: a max of a wave speed, the f64 sum of an f32 field under a branch, a
/// written field, a neighbour read.
#[stencil]
fn speed_stats(
    idx: Idx3,
    g: f32,
    h: &Field3<f32>,
    u: &Field3<f32>,
    c: &mut Field3<f32>,
    fastest: &mut Max<f32>,
    mass: &mut Sum<f64>,
    dip: &mut Min<f32>,
) {
    let s = u[idx].abs() + (g * h[idx]).sqrt();
    c[idx] = s;
    fastest.fold(s);
    if h[idx] > 0.0 {
        mass.fold(h[idx] as f64);
    }
    dip.fold(h[idx] - h[idx.ix::<0, 0, -1>()]);
}

/// Held scalars: `a` read through its address at the kernel's entry, then like any scalar.
#[stencil]
fn held_scale(idx: Idx3, a: Held<f64>, b: f64, u: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = a * u[idx.ix::<1, 0, 0>()] + b / a;
}

/// A reduction reading a held scalar (a time step's clock).
#[stencil]
fn held_clock(idx: Idx3, t_end: f64, rate: Held<f64>, t: Held<f64>, u: &Field3<f64>, dt: &mut Min<f64>) {
    dt.fold((u[idx] / rate).min(t_end - t));
}

/// Two written fields.
#[stencil]
fn two_writes(idx: Idx3, u: &Field3<f32>, out: &mut Field3<f32>, copy: &mut Field3<f32>) {
    out[idx] = u[idx.ix::<1, 0, 0>()];
    copy[idx] = u[idx];
}

/// Writes its output only where a condition holds.
#[stencil]
fn maybe_store(idx: Idx3, u: &Field3<f32>, out: &mut Field3<f32>) {
    if u[idx] > 0.0 {
        out[idx] = u[idx.ix::<0, 0, 1>()];
    }
}

/// A column sweep: a carried local, the level, a written field read one level below.
#[stencil(sweep = forward)]
fn settle(idx: Idx3, w: f64, q: &Field3<f64>, flux: &mut Field3<f64>, out: &mut Field3<f64>) {
    #[carry]
    let mut falling = 0.0;
    let below = if idx.level() == 0 { 0.0 } else { flux[idx.ix(0, 0, -1)] };
    falling = 0.5 * falling + w * q[idx];
    flux[idx] = falling;
    out[idx] = q[idx] + below - falling;
}

/// Carried locals named like the kernel's own variables (`c`, `base`, `origin`): the column
/// kernel keeps its variables out of their way.
#[stencil(sweep = forward)]
fn kernel_names(idx: Idx3, q: &Field3<f64>, out: &mut Field3<f64>) {
    #[carry]
    let mut c = 0.0;
    #[carry]
    let mut base = 1.0;
    #[carry]
    let mut origin = 2.0;
    c += q[idx];
    base *= 0.5;
    origin -= base;
    out[idx] = c + base + origin;
}

/// A 2D backward sweep along j with the level count (f32).
#[stencil(sweep = backward)]
fn rise(idx: Idx2, q: &Field2<f32>, total: &mut Field2<f32>) {
    let top = idx.level() == 0;
    total[idx] = if top { q[idx] } else { total[idx.ix(0, 1)] + q[idx] * (idx.levels() as f32) };
}

/// Point functions: the kernel gets them inlined, each offset's value computed once per point.
#[stencil]
fn flux_points(idx: Idx3, c: f64, u: &Field3<f64>, out: &mut Field3<f64>) {
    let fx = |p: Idx3| {
        let (l, r) = (u[p], u[p.ix::<1, 0, 0>()]);
        if l > r {
            l * l
        } else {
            (l * r).abs().sqrt()
        }
    };
    let fz = |p: Idx3| (u[p.ix::<0, 0, 1>()] - u[p]) * c;
    out[idx] = u[idx] - c * (fx(idx) - fx(idx.ix::<-1, 0, 0>()) + fz(idx) - fz(idx.ix::<0, 0, -1>()));
}

/// The FWI update's form (25-point star, damping, division by the slowness): its adjoint reads a
/// scaled cotangent at 25 neighbours, which the two-pass strategies write out first.
#[stencil(adjoint(u, u_prev))]
#[rustfmt::skip]
fn wave25(
    idx: Idx3, c: [f64; 5], dt2: f64, m: &Field3<f64>, damp: &Field3<f64>, u: &Field3<f64>, u_prev: &Field3<f64>,
    u_next: &mut Field3<f64>,
) {
    let mut lap = c[0] * u[idx];
    for r in 1..=4 {
        lap += c[r] * (u[idx.ix(r, 0, 0)] + u[idx.ix(-r, 0, 0)]);
        lap += c[r] * (u[idx.ix(0, r, 0)] + u[idx.ix(0, -r, 0)]);
        lap += c[r] * (u[idx.ix(0, 0, r)] + u[idx.ix(0, 0, -r)]);
    }
    let d = damp[idx];
    u_next[idx] = (2.0 * u[idx] - (1.0 - d) * u_prev[idx] + dt2 * lap / m[idx]) / (1.0 + d);
}

/// One configuration of each strategy, plus the scalar (unaligned) form of z-marching.
fn snapshot_strategies() -> Vec<(&'static str, Strategy)> {
    vec![
        ("point", Strategy::PointPerThread { block: [32, 4, 2] }),
        ("zmarch", Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 16 }),
        ("stream25d", Strategy::Stream25D { tile_x: 32, tile_y: 8 }),
        ("smem3d", Strategy::SharedTile3D { tile: [32, 4, 4] }),
    ]
}

/// Every kernel of the suite: (name, kernel).
fn kernels() -> Vec<(String, CudaKernel)> {
    let mut out = Vec::new();
    let s1 = Shape3::new([512, 512, 512]).halo(1);
    let s4 = Shape3::new([512, 512, 512]).halo(4);
    let kij = Shape3::new([64, 64, 64]).halo(1).order(Order::Kij);
    let unaligned = Loop3D::interior(&s1).shrink([1, 0, 0]);
    let s2 = Shape3::new([64, 64, 64]).halo(2);
    for (label, s) in snapshot_strategies() {
        out.push((format!("euler_{label}"), cuda_kernel::<EulerFluxX, 3>(s, &s2, &Loop3D::interior(&s2)).unwrap()));
        out.push((format!("diffusion_{label}"), cuda_kernel::<Diffusion, 3>(s, &s1, &Loop3D::interior(&s1)).unwrap()));
        out.push((format!("star25_{label}"), cuda_kernel::<Star25, 3>(s, &s4, &Loop3D::interior(&s4)).unwrap()));
        out.push((format!("branchy_{label}"), cuda_kernel::<Branchy, 3>(s, &s1, &Loop3D::interior(&s1)).unwrap()));
        out.push((format!("held_{label}"), cuda_kernel::<HeldScale, 3>(s, &s2, &Loop3D::interior(&s2)).unwrap()));
        out.push((
            format!("branchy_kij_{label}"),
            cuda_kernel::<Branchy, 3>(s, &kij, &Loop3D::interior(&kij)).unwrap(),
        ));
    }
    let zmarch = Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 16 };
    out.push(("diffusion_zmarch_unaligned".into(), cuda_kernel::<Diffusion, 3>(zmarch, &s1, &unaligned).unwrap()));
    let whole = Loop3D::interior(&s1);
    out.push(("leapfrog7_in_place_zmarch".into(), cuda_kernel::<Leapfrog7, 3>(zmarch, &s1, &whole).unwrap()));
    let point = Strategy::PointPerThread { block: [32, 4, 2] };
    out.push(("leapfrog7_in_place_point".into(), cuda_kernel::<Leapfrog7, 3>(point, &s1, &whole).unwrap()));
    let reduce = |s: &Shape3| cuda_reduce_kernel::<SpeedStats, 3>(s, &Loop3D::interior(s)).expect("reduces").kernel;
    out.push(("reduce_speed_stats".into(), reduce(&s1)));
    out.push(("reduce_speed_stats_kij".into(), reduce(&kij)));
    let clock = cuda_reduce_kernel::<HeldClock, 3>(&s2, &Loop3D::interior(&s2)).expect("reduces").kernel;
    out.push(("reduce_held_clock".into(), clock));
    out.push(("held_boxes".into(), cuda_boxes_kernel::<HeldScale, 3>(&s2).unwrap()));
    let columns = Shape3::new([64, 48, 32]).halo_per_axis([0, 0, 1]);
    out.push(("sweep_settle".into(), cuda_kernel::<Settle, 3>(point, &columns, &Loop3D::interior(&columns)).unwrap()));
    let names = Loop3D::interior(&columns);
    out.push(("sweep_kernel_names".into(), cuda_kernel::<KernelNames, 3>(point, &columns, &names).unwrap()));
    let columns_kij = columns.order(Order::Kij);
    let in_kij = Loop3D::interior(&columns_kij);
    out.push(("sweep_settle_kij".into(), cuda_kernel::<Settle, 3>(zmarch, &columns_kij, &in_kij).unwrap()));
    let plane = Shape2::new([100, 40]).halo(1);
    out.push(("sweep_rise_2d".into(), cuda_kernel::<Rise, 2>(point, &plane, &Loop2D::interior(&plane)).unwrap()));
    let inner = Loop3D::interior(&s1);
    out.push(("point_fns_zmarch".into(), cuda_kernel::<FluxPoints, 3>(zmarch, &s1, &inner).unwrap()));
    out.push(("point_fns_point".into(), cuda_kernel::<FluxPoints, 3>(point, &s1, &inner).unwrap()));
    let depot = Strategy::Depot { block_x: 32, block_y: 4, planes: 8 };
    out.push(("point_fns_depot".into(), cuda_kernel::<FluxPoints, 3>(depot, &s1, &inner).unwrap()));
    let two = Strategy::TwoPass { block_x: 64, block_y: 4, points_per_thread: 16 };
    let one = |mut k: Vec<CudaKernel>| {
        assert_eq!(k.len(), 1, "one box of offsets, one first pass");
        k.remove(0)
    };
    // `fx` is read along x, `fz` along z: a first pass for each.
    let firsts = cuda_first_pass_kernels::<FluxPoints, 3>(&s1, &inner).unwrap();
    assert_eq!(firsts.len(), 2, "two boxes of offsets, two first passes");
    for (n, k) in firsts.into_iter().enumerate() {
        out.push((format!("point_fns_twopass_first{n}"), k));
    }
    out.push(("point_fns_twopass".into(), cuda_kernel::<FluxPoints, 3>(two, &s1, &inner).unwrap()));
    let wave = Loop3D::interior(&s4).shrink([4; 3]);
    out.push(("adjoint25_twopass_first".into(), one(cuda_first_pass_kernels::<Wave25Adjoint, 3>(&s4, &wave).unwrap())));
    out.push(("adjoint25_twopass_point".into(), cuda_point_pass_kernel::<Wave25Adjoint, 3>(&s4, &wave).unwrap()));
    out.push(("adjoint25_twopass".into(), cuda_kernel::<Wave25Adjoint, 3>(two, &s4, &wave).unwrap()));
    let stream = Strategy::TwoPassStream { tile_x: 32, tile_y: 8 };
    out.push(("adjoint25_twopassstream".into(), cuda_kernel::<Wave25Adjoint, 3>(stream, &s4, &wave).unwrap()));
    out.push(("adjoint25_depot".into(), cuda_kernel::<Wave25Adjoint, 3>(depot, &s4, &wave).unwrap()));
    let s3 = Shape3::new([64, 64, 64]).halo(3);
    let lopsided = cuda_kernel::<LopsidedRing, 3>(depot, &s3, &Loop3D::interior(&s3)).unwrap();
    out.push(("point_fns_lopsided_ring_depot".into(), lopsided));
    let kij2 = Shape3::new([64, 64, 64]).halo(2).order(Order::Kij);
    out.push((
        "point_fns_nested_depot_kij".into(),
        cuda_kernel::<Nested, 3>(depot, &kij2, &Loop3D::interior(&kij2)).unwrap(),
    ));
    let s64 = Shape3::new([64, 64, 64]).halo_per_axis([1, 1, 2]);
    let steps3: TimeTiling = "steps3_32x32x64".parse().unwrap();
    let f = |t: TimeTiling| cuda_steps_kernel::<Diffusion, 3>(t, "f", &s1, &Loop3D::interior(&s1)).unwrap();
    out.push(("diffusion_steps3".into(), f(steps3)));
    out.push(("diffusion_steps1".into(), f(steps3.with_steps(1))));
    out.push(("diffusion_steps3_v2".into(), f("steps3_32x32x64_v2".parse().unwrap())));
    out.push((
        "star25_steps1_kij".into(),
        cuda_steps_kernel::<Star25, 3>(steps3.with_steps(1), "u", &s4.order(Order::Kij), &Loop3D::interior(&s4))
            .unwrap(),
    ));
    // Several ranges in one launch: reach 1 and 4, Kij, point functions inlined, 2D, f64.
    out.push(("diffusion_boxes".into(), cuda_boxes_kernel::<Diffusion, 3>(&s1).unwrap()));
    out.push(("star25_boxes".into(), cuda_boxes_kernel::<Star25, 3>(&s4).unwrap()));
    out.push(("branchy_boxes_kij".into(), cuda_boxes_kernel::<Branchy, 3>(&kij).unwrap()));
    out.push(("point_fns_boxes".into(), cuda_boxes_kernel::<FluxPoints, 3>(&s1).unwrap()));
    out.push(("jacobi2d_boxes".into(), cuda_boxes_kernel::<Jacobi2d, 2>(&plane).unwrap()));
    out.push(("f64_boxes".into(), cuda_boxes_kernel::<DiffusionF64, 3>(&s64).unwrap()));
    out.push(("f64_zmarch".into(), cuda_kernel::<DiffusionF64, 3>(zmarch, &s64, &Loop3D::interior(&s64)).unwrap()));
    out
}

#[test]
fn generated_cuda_snapshots() {
    for (name, k) in kernels() {
        let text = format!(
            "// entry {} block {:?} points/block {:?} shared {} B\n{}",
            k.entry, k.block, k.points_per_block, k.shared_bytes, k.source
        );
        insta::assert_snapshot!(name, text);
    }
}

#[test]
fn vector_width_follows_alignment() {
    let s1 = Shape3::new([512, 512, 512]).halo(1);
    let zmarch = Strategy::ZMarch { block_x: 64, block_y: 4, points_per_thread: 16 };
    let aligned = cuda_kernel::<Diffusion, 3>(zmarch, &s1, &Loop3D::interior(&s1)).unwrap();
    assert!(aligned.source.contains("float4") && aligned.points_per_block[0] == 256);
    let shifted = cuda_kernel::<Diffusion, 3>(zmarch, &s1, &Loop3D::interior(&s1).shrink([1, 0, 0])).unwrap();
    assert!(!shifted.source.contains("float4") && shifted.points_per_block[0] == 64);
    let f64k = cuda_kernel::<DiffusionF64, 3>(zmarch, &s1, &Loop3D::interior(&s1)).unwrap();
    assert!(f64k.source.contains("double2"));
}

#[test]
fn a_reducing_stencil_has_no_strategy_kernel() {
    let s = Shape3::new([8, 8, 8]).halo(1);
    let r = Loop3D::interior(&s);
    let e = cuda_kernel::<SpeedStats, 3>(Strategy::PointPerThread { block: [32, 4, 2] }, &s, &r).unwrap_err();
    assert!(e.to_string().contains("reduction kernel"), "{e}");
    assert!(cuda_reduce_kernel::<Diffusion, 3>(&s, &r).is_none());
    let k = cuda_reduce_kernel::<SpeedStats, 3>(&s, &r).unwrap();
    assert!(k.kernel.source.contains(&format!("void __launch_bounds__(256) {}(", k.final_entry)));
    assert!(!k.kernel.source.contains("atomic"), "no atomics: the result is deterministic");
}

#[test]
fn bad_blocks_are_errors() {
    let s = Shape3::new([8, 8, 8]).halo(1);
    let r = Loop3D::interior(&s);
    let e = cuda_kernel::<Diffusion, 3>(Strategy::PointPerThread { block: [64, 32, 1] }, &s, &r).unwrap_err();
    assert!(e.to_string().contains("1 to 1024 threads"), "{e}");
    let e = cuda_kernel::<Diffusion, 3>(Strategy::ZMarch { block_x: 32, block_y: 2, points_per_thread: 0 }, &s, &r)
        .unwrap_err();
    assert!(e.to_string().contains("points_per_thread"), "{e}");
    let e = cuda_kernel::<Diffusion, 3>(Strategy::Depot { block_x: 32, block_y: 2, planes: 0 }, &s, &r).unwrap_err();
    assert!(e.to_string().contains("planes must be at least 1"), "{e}");
    // Two passes need a point function read at a neighbour.
    let two = Strategy::TwoPass { block_x: 64, block_y: 4, points_per_thread: 16 };
    let e = cuda_kernel::<Diffusion, 3>(two, &s, &r).unwrap_err();
    assert!(e.to_string().contains("no value to write out"), "{e}");
    assert!(cuda_first_pass_kernels::<Diffusion, 3>(&s, &r).is_err());
    // A first pass by a number the split does not have (FluxPoints has two, one per axis).
    let geometry =
        stencil_runtime::codegen::printer::cuda::Geometry { strides: [1, 10, 100], layout: [0, 1, 2], lanes: 1 };
    let ir = <FluxPoints as stencil_runtime::Stencil<3>>::source_ir();
    assert!(stencil_runtime::codegen::printer::cuda::print_first_pass(ir, 1, &geometry).is_ok());
    let e = stencil_runtime::codegen::printer::cuda::print_first_pass(ir, 2, &geometry).unwrap_err().to_string();
    assert!(e.contains("has 2 first pass(es)") && e.contains("there is no pass 2"), "{e}");
    // FluxPoints stores one value, which starts with a neighbour's term: no point pass.
    let e = cuda_point_pass_kernel::<FluxPoints, 3>(&s, &r).unwrap_err();
    assert!(e.to_string().contains("no point pass"), "{e}");
    // A ring of 9 planes of 8 f64 values: 9 x 8 x 8 B = 576 B per thread, 147 KB for 256
    // threads, 295 KB for 512.
    let s4 = Shape3::new([64, 64, 64]).halo(4);
    let r4 = Loop3D::interior(&s4);
    assert!(cuda_kernel::<DeepRing, 3>(Strategy::Depot { block_x: 32, block_y: 8, planes: 8 }, &s4, &r4).is_ok());
    let e = cuda_kernel::<DeepRing, 3>(Strategy::Depot { block_x: 32, block_y: 16, planes: 8 }, &s4, &r4).unwrap_err();
    let e = e.to_string();
    assert!(e.contains("depot_32x16x8") && e.contains("294912 bytes of shared memory per block"), "{e}");
    assert!(e.contains("use a smaller block or another strategy"), "{e}");
}

/// A point function of 8 values needed on 9 planes (a ring of 9 planes in the depot kernel).
#[stencil]
fn deep_ring(idx: Idx3, u: &Field3<f64>, out: &mut Field3<f64>) {
    let f = |p: Idx3| {
        let a = u[p] * 1.5 + 0.25;
        [a, a * a, a * 3.0 - 1.0, a / 7.0, a + 2.0, a * 0.5, a - 0.125, a * a * a]
    };
    let (l, h) = (f(idx.ix::<0, 0, -4>()), f(idx.ix::<0, 0, 4>()));
    let mut s = 0.0;
    for v in 0..8 {
        s += l[v] * h[7 - v];
    }
    out[idx] = s + f(idx)[3];
}

#[test]
fn stencils_that_cannot_run_several_steps_per_sweep_say_why() {
    let s = Shape3::new([64, 64, 64]).halo(1);
    let r = Loop3D::interior(&s);
    let t: TimeTiling = "steps3_32x32x16".parse().unwrap();
    let why = |e: stencil_runtime::cuda_source::StrategyError| e.to_string();
    // Reads the field it writes (in place), and names the pair's input as its output.
    let e = why(cuda_steps_kernel::<Leapfrog7, 3>(t, "u", &s, &r).unwrap_err());
    assert!(e.contains("it reads `u_prev`, the field it writes"), "{e}");
    let e = why(cuda_steps_kernel::<Diffusion, 3>(t, "f_new", &s, &r).unwrap_err());
    assert!(e.contains("must be a field the stencil reads and does not write"), "{e}");
    let e = why(cuda_steps_kernel::<Diffusion, 3>(t, "g", &s, &r).unwrap_err());
    assert!(e.contains("no parameter `g`"), "{e}");
    // Two written fields; a store under a condition; a 2D stencil; a reduction.
    let e = why(cuda_steps_kernel::<Settle, 3>(t, "q", &s, &r).unwrap_err());
    assert!(e.contains("reduces or sweeps columns"), "{e}");
    let e = why(cuda_steps_kernel::<TwoWrites, 3>(t, "u", &s, &r).unwrap_err());
    assert!(e.contains("writes 2 fields (out, copy)"), "{e}");
    let e = why(cuda_steps_kernel::<MaybeStore, 3>(t, "u", &s, &r).unwrap_err());
    assert!(e.contains("only under a condition"), "{e}");
    let plane = Shape2::new([64, 64]).halo(1);
    let e = why(cuda_steps_kernel::<Rise, 2>(t, "q", &plane, &Loop2D::interior(&plane)).unwrap_err());
    assert!(e.contains("2D"), "{e}");
    // A tiling that leaves no output (too much shared memory: the printer's unit tests).
    let s4 = Shape3::new([64, 64, 64]).halo(4);
    let e = why(cuda_steps_kernel::<Star25, 3>(t.with_steps(5), "u", &s4, &Loop3D::interior(&s4)).unwrap_err());
    assert!(e.contains("leave no output in a tile of 32: use fewer steps or a wider tile"), "{e}");
    assert!("steps3_32x32".parse::<TimeTiling>().is_err() && "zmarch_1x2x3".parse::<TimeTiling>().is_err());
    assert!("steps3_32x32x8_2".parse::<TimeTiling>().is_err() && "steps3_32x32x8_v2_v2".parse::<TimeTiling>().is_err());
    let v2: TimeTiling = "steps3_32x32x8_v2".parse().unwrap();
    assert_eq!((v2.lanes, v2.label()), (2, "steps3_32x32x8_v2".to_string()));
    let e = why(cuda_steps_kernel::<DiffusionF64, 3>("steps3_8x8x8_v4".parse().unwrap(), "f", &s, &r).unwrap_err());
    assert!(e.contains("4 points per thread of 8-byte elements"), "{e}");
    assert_eq!(t.label().parse::<TimeTiling>().unwrap(), t);
}

/// Compiles every kernel with NVRTC (CI installs NVRTC 13.0 from PyPI) and prints registers and
/// spills; fails on any compile error or spill.
#[cfg(feature = "cuda")]
#[test]
fn every_kernel_compiles_with_nvrtc() {
    use stencil_runtime::cuda::compile_check;
    let mut report = Vec::new();
    match stencil_runtime::cuda::nvrtc_info() {
        Ok(nvrtc) => println!("compiling with {nvrtc}"),
        Err(e) => panic!("{e}"),
    }
    for (name, k) in kernels() {
        let log = compile_check(&k.source, "sm_90", &["--ptxas-options=-v"])
            .unwrap_or_else(|e| panic!("kernel {name} does not compile:\n{e}\n{}", k.source));
        let usage =
            log.lines().filter(|l| l.contains("registers") || l.contains("spill")).collect::<Vec<_>>().join(" | ");
        report.push(format!("{name:32} {usage}"));
        assert!(!log.contains("bytes spill stores") || log.contains("0 bytes spill stores"), "{name} spills: {log}");
    }
    println!("{}", report.join("\n"));
}

/// The depot kernels of random stencils with point functions (the fuzz generator's) compile with
/// NVRTC: point functions calling each other at random offsets on random planes.
#[cfg(feature = "cuda")]
#[test]
fn random_depot_kernels_compile_with_nvrtc() {
    use stencil_codegen::printer::cuda::print_kernel;
    use stencil_codegen::StencilIr;
    use stencil_runtime::cuda::compile_check;
    use stencil_tests::fuzz::gen::Generated;
    let shape = Shape3::new([16; 3]).halo(2);
    let geometry = stencil_runtime::cuda_source::geometry(&shape, &Loop3D::interior(&shape), 8);
    let depot = Strategy::Depot { block_x: 16, block_y: 4, planes: 4 };
    let mut compiled = 0;
    for seed in (1u64 << 40)..(1 << 40) + 400 {
        let source = Generated::new(seed).source();
        let ir = StencilIr::from_source(&source).unwrap_or_else(|e| panic!("{source}\n{}", e.kind));
        if ir.point_fns.is_empty() || ir.reduces() {
            continue;
        }
        let k = print_kernel(&ir, depot, &geometry).unwrap_or_else(|e| panic!("{source}\n{e}"));
        compile_check(&k.source, "sm_90", &[]).unwrap_or_else(|e| panic!("{source}\n{e}\n{}", k.source));
        compiled += 1;
        if compiled == 24 {
            break;
        }
    }
    assert_eq!(compiled, 24, "too few random stencils with point functions");
}
