//! Column sweeps on the host (`#[stencil(sweep = forward | backward)]`): each column updated
//! level by level, reading what earlier levels wrote and carrying locals between levels.
//! Checked against independent references on random inputs with poisoned outputs: a dense
//! Gaussian elimination for the Thomas solve of a tridiagonal system per column, plain loops for
//! running sums; over both element orders (the column axis across rows and along them), 2D and
//! 3D, sub-ranges (a sweep walks the levels of its launch range), and thread counts.

use stencil_runtime::prelude::*;
use stencil_runtime::{cuda_kernel, Loop, Strategy};
use stencil_tests::sweeping::{
    LevelsLeft, RunningDown, RunningUp, Substitute, ThomasBackward, ThomasForward, ThomasForwardCarried,
};
use stencil_tests::{assert_bits_eq, for_each_in_range, nb, poisoned, random, range_contains, SplitMix64};

/// Solves the tridiagonal system of one column by dense Gaussian elimination with partial
/// pivoting (independent of the Thomas recurrences).
fn dense_solve(lower: &[f64], diag: &[f64], upper: &[f64], rhs: &[f64]) -> Vec<f64> {
    let n = diag.len();
    let mut m = vec![vec![0.0; n + 1]; n];
    for k in 0..n {
        m[k][k] = diag[k];
        if k > 0 {
            m[k][k - 1] = lower[k];
        }
        if k + 1 < n {
            m[k][k + 1] = upper[k];
        }
        m[k][n] = rhs[k];
    }
    for col in 0..n {
        let pivot = (col..n).max_by(|&r, &s| m[r][col].abs().total_cmp(&m[s][col].abs())).unwrap();
        m.swap(col, pivot);
        let pivot_row = m[col].clone();
        for row in m.iter_mut().skip(col + 1) {
            let f = row[col] / pivot_row[col];
            for (v, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                *v -= f * p;
            }
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        let s: f64 = (r + 1..n).map(|c| m[r][c] * x[c]).sum();
        x[r] = (m[r][n] - s) / m[r][r];
    }
    x
}

/// The columns of `range` (global (i, j)) with their global k from bottom to top.
fn columns(range: &Loop<3>, shape: &Shape3) -> Vec<([isize; 2], Vec<isize>)> {
    let mut cols: std::collections::BTreeMap<[isize; 2], Vec<isize>> = Default::default();
    for_each_in_range(range, shape, |[i, j, k]| cols.entry([i, j]).or_default().push(k));
    cols.into_iter()
        .map(|(c, mut ks)| {
            (c, {
                ks.sort();
                ks
            })
        })
        .collect()
}

#[test]
fn thomas_sweeps_solve_every_column_like_a_dense_solver() {
    let mut rng = SplitMix64::new(0x5eed_5eeb);
    for (n, order, shrink) in [
        ([13, 7, 24], Order::Ijk, [0, 0, 0]),
        ([9, 11, 17], Order::Kij, [0, 0, 0]),
        ([21, 6, 30], Order::Ijk, [2, 1, 3]),
        ([5, 4, 1], Order::Ijk, [0, 0, 0]),
    ] {
        let shape = Shape3::new(n).halo(1).order(order);
        let range = Loop3D::interior(&shape).shrink(shrink);
        let a: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
        let c: Field3<f64> = random(shape, &mut rng, -1.0, 1.0);
        // Diagonally dominant: |b| > |a| + |c|.
        let b = Field3::from_fn(shape, |_| rng.uniform(2.5, 4.0) * if rng.unit() < 0.5 { -1.0 } else { 1.0 });
        let d: Field3<f64> = random(shape, &mut rng, -5.0, 5.0);
        let (mut cp, mut dp, mut x) = (poisoned(shape), poisoned(shape), poisoned(shape));
        range.run(ThomasForward, (&a, &b, &c, &d, &mut cp, &mut dp)).unwrap();
        range.run(ThomasBackward, (&cp, &dp, &mut x)).unwrap();
        let mut worst = 0.0f64;
        for ([i, j], ks) in columns(&range, &shape) {
            let at = |f: &Field3<f64>, k: isize| f.get([i, j, k]).unwrap();
            let last = ks.len() - 1;
            let lower: Vec<f64> = ks.iter().map(|&k| at(&a, k)).collect();
            let upper: Vec<f64> =
                ks.iter().enumerate().map(|(l, &k)| if l == last { 0.0 } else { at(&c, k) }).collect();
            let diag: Vec<f64> = ks.iter().map(|&k| at(&b, k)).collect();
            let rhs: Vec<f64> = ks.iter().map(|&k| at(&d, k)).collect();
            let want = dense_solve(&lower, &diag, &upper, &rhs);
            for (l, &k) in ks.iter().enumerate() {
                let scale = want[l].abs().max(1.0);
                worst = worst.max((at(&x, k) - want[l]).abs() / scale);
            }
        }
        assert!(worst < 1e-12, "{n:?} {order:?}: largest relative difference from the dense solve {worst:e}");
        // Outside the range nothing is written.
        stencil_tests::for_each_point(&shape, |g| {
            if !range_contains(&range, &shape, g) {
                assert!(x.get(g).unwrap().is_nan(), "{g:?} written outside the range");
            }
        });
        // Carrying the level below in locals gives the same bits as reading it back.
        let (mut cp2, mut dp2) = (poisoned(shape), poisoned(shape));
        range.run(ThomasForwardCarried, (&a, &b, &c, &d, &mut cp2, &mut dp2)).unwrap();
        assert_bits_eq(&cp2, &cp, "carried cp");
        assert_bits_eq(&dp2, &dp, "carried dp");
        // The same for the solution above in back substitution (the carried value starts at 0,
        // so the top level gets `dp - cp * 0 = dp`, as `thomas_backward` writes there).
        let mut x2 = poisoned(shape);
        range.run(Substitute, (&cp, &dp, &mut x2)).unwrap();
        assert_bits_eq(&x2, &x, "carried back substitution");
    }
}

#[test]
fn running_sums_match_plain_loops_in_both_orders_and_on_any_thread_count() {
    let mut rng = SplitMix64::new(0x5eed_0217);
    for (n, order, shrink) in [([17, 9, 33], Order::Ijk, [0, 0, 0]), ([8, 13, 40], Order::Kij, [1, 2, 5])] {
        let shape = Shape3::new(n).halo(1).order(order);
        let range = Loop3D::interior(&shape).shrink(shrink);
        let q: Field3<f32> = random(shape, &mut rng, -1.0, 1.0);
        let (mut want_up, mut want_down) = (poisoned::<f32, 3>(shape), poisoned::<f32, 3>(shape));
        for ([i, j], ks) in columns(&range, &shape) {
            let mut acc = 0.0f32;
            for &k in &ks {
                acc += q.get([i, j, k]).unwrap();
                want_up.set([i, j, k], acc).unwrap();
            }
            let mut acc = 0.0f32;
            for &k in ks.iter().rev() {
                acc =
                    if k == *ks.last().unwrap() { nb(&q, [i, j, k], [0; 3]) } else { acc + q.get([i, j, k]).unwrap() };
                want_down.set([i, j, k], acc).unwrap();
            }
        }
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let (mut up, mut down) = (poisoned(shape), poisoned(shape));
            pool.install(|| {
                range.run(RunningUp, (&q, &mut up)).unwrap();
                range.run(RunningDown, (&q, &mut down)).unwrap();
            });
            assert_bits_eq(&up, &want_up, &format!("running sum up, {order:?}, {threads} threads"));
            assert_bits_eq(&down, &want_down, &format!("running sum down, {order:?}, {threads} threads"));
        }
    }
}

#[test]
fn a_2d_sweep_walks_j_and_counts_its_levels() {
    let mut rng = SplitMix64::new(0x5eed_0002);
    for order in [Order::Ijk, Order::Kij] {
        let shape = Shape2::new([11, 9]).halo(1).order(order);
        let range = Loop2D::interior(&shape).shrink([1, 2]);
        let q: Field2<f64> = random(shape, &mut rng, 0.0, 0.5);
        let mut out = poisoned(shape);
        let mut seen = Field2::filled(shape, -7i32);
        range.run(LevelsLeft, (&q, &mut out, &mut seen)).unwrap();
        let (j0, nj) = (range.begin()[1] as isize - 1, range.len_per_axis()[1] as isize);
        let mut want = poisoned::<f64, 2>(shape);
        for_each_in_range(&range, &shape, |[i, j]| {
            let level = j - j0;
            want.set([i, j], (nj - 1 - level) as f64 + q.get([i, j]).unwrap()).unwrap();
            assert_eq!(seen.get([i, j]), Some(level as i32 + 1), "carried count at {:?}", [i, j]);
        });
        assert_bits_eq(&out, &want, &format!("levels left, {order:?}"));
    }
}

#[test]
fn a_sweep_reading_below_its_first_level_needs_the_halo() {
    // `thomas_backward` reads `x` one level above: a range reaching the top of a field with no
    // halo along k is refused by the launch, naming the field.
    let shape = Shape3::new([4, 4, 6]).halo_per_axis([1, 1, 0]);
    let (cp, dp) = (Field3::<f64>::zeros(shape), Field3::<f64>::zeros(shape));
    let mut x = Field3::<f64>::zeros(shape);
    let e = Loop3D::interior(&shape).run(ThomasBackward, (&cp, &dp, &mut x)).unwrap_err();
    assert!(e.to_string().contains("`x`"), "{e}");
}

/// A sweep reading 16 f64 fields: their tiles of even 4 levels exceed a warp's 16 KiB.
#[stencil(sweep = forward)]
fn wide_sum(idx: Idx3, q: [&Field3<f64>; 16], out: &mut Field3<f64>) {
    let mut s = 0.0;
    for v in 0..16 {
        s += q[v][idx];
    }
    out[idx] = s;
}

#[test]
fn a_kij_sweep_too_wide_to_stage_keeps_one_thread_per_column() {
    let kij = Shape3::new([8, 8, 8]).halo(1).order(Order::Kij);
    let k = cuda_kernel::<WideSum, 3>(Strategy::default_for(WideSum::ir()), &kij, &Loop3D::interior(&kij)).unwrap();
    assert_eq!((k.block, k.points_per_block, k.shared_bytes), ([1, 64, 4], [u32::MAX, 64, 4], 0), "{}", k.source);
    assert!(!k.source.contains("__syncwarp"), "{}", k.source);
}

#[test]
fn sweeps_carry_their_order_in_the_ir_and_print_one_thread_per_column() {
    use stencil_runtime::codegen::ir::SweepOrder;
    assert_eq!(<ThomasForward as Stencil<3>>::ir().sweep.as_ref().map(|s| s.order), Some(SweepOrder::Forward));
    assert_eq!(<ThomasBackward as Stencil<3>>::ir().sweep.as_ref().map(|s| s.order), Some(SweepOrder::Backward));
    assert_eq!(<ThomasForwardCarried as Stencil<3>>::ir().sweep.as_ref().map(|s| s.carried.len()), Some(2));
    // Every strategy prints the column kernel: a block across the columns, the whole column per
    // thread (one block along it), the levels walked in the sweep's order.
    let shape = Shape3::new([8, 8, 8]).halo(1);
    let range = Loop3D::interior(&shape);
    for strategy in [Strategy::default_for(ThomasForward::ir()), Strategy::PointPerThread { block: [8, 8, 2] }] {
        let k = cuda_kernel::<ThomasBackward, 3>(strategy, &shape, &range).unwrap();
        assert_eq!(k.entry, "thomas_backward_column");
        assert_eq!((k.block, k.points_per_block), ([64, 4, 1], [64, 4, u32::MAX]));
        assert!(k.source.contains("sweep_levels - 1 - sweep_level"), "{}", k.source);
    }
    // Where the column axis is the contiguous one, each warp stages its 32 columns through
    // shared memory: 32 columns by 4 warps, a chunk of levels at a time, in the sweep's order.
    let kij = shape.order(Order::Kij);
    let k = cuda_kernel::<ThomasForward, 3>(Strategy::default_for(ThomasForward::ir()), &kij, &Loop3D::interior(&kij))
        .unwrap();
    assert_eq!((k.block, k.points_per_block), ([32, 4, 1], [u32::MAX, 32, 4]));
    assert!(k.shared_bytes > 0 && k.source.contains("__syncwarp()") && k.source.contains("__a0 + __r"), "{}", k.source);
    let k =
        cuda_kernel::<ThomasBackward, 3>(Strategy::default_for(ThomasBackward::ir()), &kij, &Loop3D::interior(&kij))
            .unwrap();
    assert!(k.source.contains("__a1 - __r") && k.source.contains("sweep_levels - 1 - __q"), "{}", k.source);
}
