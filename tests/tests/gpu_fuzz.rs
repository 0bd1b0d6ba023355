//! GPU fuzz (run on the device machine: `scripts/gpu-check`; builds only with `--features
//! cuda`): the build script's random stencils, half of them with point functions, under two
//! depot blocks (`Strategy::Depot`: point functions' values in shared memory) and, where a point
//! function is read at a neighbour, two two-pass strategies (its values written to scratch
//! fields first) against one thread per point (the inlined form), over random sub-ranges of random fields in both element orders.
//! Outputs are poisoned; every point of every output, inside the range and out, must agree bit
//! for bit (NaN as NaN), and so must the reductions. Both sides run on the GPU, so the math
//! library is the same: a difference is the depot kernel's.
#![cfg(feature = "cuda")]

use stencil_runtime::cuda::Gpu;
use stencil_runtime::prelude::*;
use stencil_runtime::{DeviceField, Strategy};
use stencil_tests::fuzz::gen::Generated;
use stencil_tests::SplitMix64;

mod compiled {
    #![allow(unused_parens, unused_variables, dead_code, clippy::all)]
    use stencil_runtime::prelude::*;
    include!(concat!(env!("OUT_DIR"), "/fuzz_stencils.rs"));
}

/// What outputs hold before a launch: no stencil computes it by chance.
const POISON: f64 = -7.25e300;

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn random_stencils_under_the_depot_kernel_match_one_thread_per_point() {
    let gpu = Gpu::new(0).expect("the GPU fuzz test needs a CUDA device");
    let reference = Strategy::PointPerThread { block: [32, 4, 2] };
    let depots = [
        Strategy::Depot { block_x: 32, block_y: 4, planes: 8 },
        Strategy::Depot { block_x: 16, block_y: 3, planes: 5 },
        // Where the stencil reads a point function at a neighbour (else skipped).
        Strategy::TwoPass { block_x: 16, block_y: 3, points_per_thread: 5 },
        Strategy::TwoPassStream { tile_x: 16, tile_y: 5 },
    ];
    let mut cases = 0;
    for seed in 0..compiled::STENCILS {
        let g = Generated::new(seed);
        for run in 0..4 {
            let mut rng = SplitMix64::new(seed * 7919 + run);
            let n: [usize; 3] = std::array::from_fn(|_| rng.int(1, 19) as usize);
            let order = if rng.int(0, 1) == 0 { Order::Ijk } else { Order::Kij };
            let shape = Shape3::new(n).halo(2).order(order);
            let mut value = |_: [isize; 3]| match rng.int(0, 19) {
                0 => 0.0,
                1 => -0.0,
                2 => 1e30,
                _ => rng.int(-4000, 4000) as f64 / 997.0,
            };
            let (mut in64, mut in32) = (Vec::new(), Vec::new());
            for &f32 in &g.inputs_f32 {
                if f32 {
                    in32.push(gpu.upload(&Field3::from_fn(shape, |p| value(p) as f32)).expect("upload"));
                } else {
                    in64.push(gpu.upload(&Field3::from_fn(shape, &mut value)).expect("upload"));
                }
            }
            let scalars: Vec<f64> = (0..g.scalars).map(|_| rng.int(-4000, 4000) as f64 / 997.0).collect();
            let begin: [usize; 3] = std::array::from_fn(|a| 2 + rng.int(0, n[a] as i64 / 2) as usize);
            let end: [usize; 3] = std::array::from_fn(|a| rng.int(begin[a] as i64, 2 + n[a] as i64) as usize);
            let range = Loop3D::from_bounds(shape.extent(), begin, end).expect("a range inside the interior");
            let launch = |strategy: Strategy| {
                let mut outs: Vec<DeviceField<f64, 3>> =
                    (0..g.outputs).map(|_| gpu.upload(&Field3::filled(shape, POISON)).expect("upload")).collect();
                let reduced =
                    match compiled::launch_on(&gpu, Some(strategy), seed, &range, &in64, &in32, &scalars, &mut outs) {
                        Err(e)
                            if strategy.is_two_pass() && e.to_string().contains("no point function at a neighbour") =>
                        {
                            return None
                        }
                        r => r.unwrap_or_else(|e| panic!("stencil {seed} under {strategy}: {e}")),
                    };
                let outs: Vec<Field3<f64>> = outs.iter().map(|f| gpu.download(f).expect("download")).collect();
                Some((outs, reduced))
            };
            let (want, want_reduced) = launch(reference).expect("one thread per point runs every stencil");
            for depot in depots {
                let Some((got, reduced)) = launch(depot) else { continue };
                let what = format!("stencil {seed} run {run} {depot} {order:?} {range:?}\n{}", g.source());
                for (o, (w, d)) in want.iter().zip(&got).enumerate() {
                    let (w, d) = (w.as_slice(), d.as_slice());
                    if let Some(i) = w.iter().zip(d).position(|(a, b)| !same(*a, *b)) {
                        panic!("{what}\noutput {o}, flat index {i}: point {:?}, depot {:?}", w[i], d[i]);
                    }
                }
                assert!(want_reduced.iter().zip(&reduced).all(|(a, b)| same(*a, *b)), "{what}: reductions differ");
                cases += 1;
            }
        }
    }
    println!("{cases} cases: {} random stencils x 4 runs x up to {} strategies", compiled::STENCILS, depots.len());
}
