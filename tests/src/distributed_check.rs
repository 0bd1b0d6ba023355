//! A small model written once against `E: Executor` (three stencils of reach 2 and 1 with
//! corners, a stencil over a global sub-range, a reduction, halo fills with walls or wrap, two
//! element types), run on the [`Distributed`] executor and on one host domain: the interiors
//! must be the same bits. Shared by the host test (`distributed.rs`), the GPU test
//! (`gpu_distributed.rs`) and the ranks test.

use crate::SplitMix64;
use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Distributed, Domains, Element, Executor, Overlap};

/// Reach 2 along every axis (a 13-point star).
#[stencil]
pub fn star13(idx: Idx3, c: f64, u: &Field3<f64>, w: &mut Field3<f64>) {
    let near = u[idx.ix::<1, 0, 0>()]
        + u[idx.ix::<-1, 0, 0>()]
        + u[idx.ix::<0, 1, 0>()]
        + u[idx.ix::<0, -1, 0>()]
        + u[idx.ix::<0, 0, 1>()]
        + u[idx.ix::<0, 0, -1>()];
    let far = u[idx.ix::<2, 0, 0>()]
        + u[idx.ix::<-2, 0, 0>()]
        + u[idx.ix::<0, 2, 0>()]
        + u[idx.ix::<0, -2, 0>()]
        + u[idx.ix::<0, 0, 2>()]
        + u[idx.ix::<0, 0, -2>()];
    w[idx] = u[idx] + c * (4.0 * near - far - 18.0 * u[idx]);
}

/// Reach 1 with edges and a corner (what the exchange's later axes carry).
#[stencil]
pub fn corners(idx: Idx3, w: &Field3<f64>, u: &Field3<f64>, out: &mut Field3<f64>) {
    out[idx] = 0.5 * w[idx]
        + 0.125 * (w[idx.ix::<1, 1, 0>()] + w[idx.ix::<-1, 1, 0>()])
        + 0.0625 * (w[idx.ix::<0, -1, 1>()] + w[idx.ix::<1, 1, 1>()] - w[idx.ix::<-1, -1, -1>()])
        + 0.25 * u[idx];
}

/// A point update (no offset: needs no exchange).
#[stencil]
pub fn damp(idx: Idx3, s: f64, u: &mut Field3<f64>) {
    u[idx] = s * u[idx];
}

/// An `f32` field smoothed along x and y.
#[stencil]
pub fn smooth32(idx: Idx3, v: &Field3<f32>, out: &mut Field3<f32>) {
    out[idx] = 0.5 * v[idx]
        + 0.125 * (v[idx.ix::<1, 0, 0>()] + v[idx.ix::<-1, 0, 0>()] + v[idx.ix::<0, 1, 0>()] + v[idx.ix::<0, -1, 0>()]);
}

/// The largest magnitude.
#[stencil]
pub fn peak(idx: Idx3, u: &Field3<f64>, m: &mut Max<f64>) {
    m.fold(u[idx].abs());
}

/// One random case: the grid, process grid, periodic axes and walls, and a sub-range.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// Global interior extent.
    pub global: [usize; 3],
    /// Process grid.
    pub grid: [usize; 3],
    /// Periodic axes.
    pub periodic: [bool; 3],
    /// The fill of each walled axis.
    pub walls: [HaloFill; 3],
    /// Begin and end (global interior coordinates) of the damped sub-range.
    pub damped: ([usize; 3], [usize; 3]),
    /// Seed of the initial values.
    pub seed: u64,
    /// The fills of `u` declared once ([`Executor::declare_boundary`]) instead of asked for
    /// before each step.
    pub declare: bool,
}

impl Case {
    /// A random case whose subdomains are at least 2 points thick (the halo of `u`).
    pub fn random(rng: &mut SplitMix64, seed: u64) -> Case {
        let fills = [HaloFill::Mirror, HaloFill::MirrorNegated, HaloFill::ZeroGradient];
        let grid: [usize; 3] = std::array::from_fn(|_| rng.int(1, 3) as usize);
        let global: [usize; 3] = std::array::from_fn(|a| 2 * grid[a] + rng.int(0, 7) as usize);
        let damped = {
            let b: [usize; 3] = std::array::from_fn(|a| rng.int(0, global[a] as i64 - 1) as usize);
            (b, std::array::from_fn(|a| rng.int(b[a] as i64 + 1, global[a] as i64) as usize))
        };
        Case {
            global,
            grid,
            periodic: std::array::from_fn(|_| rng.int(0, 1) == 1),
            walls: std::array::from_fn(|_| fills[rng.int(0, 2) as usize]),
            damped,
            seed,
            declare: rng.int(0, 1) == 1,
        }
    }

    /// The decomposition.
    pub fn decomposition(&self) -> Decomposition<3> {
        Decomposition::new(self.global, self.grid, self.periodic, [2, 2, 2]).expect("the case fits")
    }

    /// The fill of each axis: `Periodic` where it wraps, the wall elsewhere.
    pub fn fills(&self) -> [Option<HaloFill>; 3] {
        std::array::from_fn(|a| Some(if self.periodic[a] { HaloFill::Periodic } else { self.walls[a] }))
    }
}

/// What the model leaves: `u`, `v` and the largest magnitude each step.
pub struct Outcome {
    /// `u` (global, halo zero beyond the interior on a distributed run).
    pub u: Field3<f64>,
    /// `v`.
    pub v: Field3<f32>,
    /// The reduction of each step.
    pub peaks: Vec<f64>,
    /// Each step: every point of `u` (halo included) after its fills, and the damped sub-range of
    /// `u` at the end (bits).
    pub probes: Vec<Vec<u64>>,
}

/// The model: `steps` steps of fill (or a boundary declared once), star13, corners, a damped sub-range and the f32 smoothing.
pub fn model<E: Executor>(exec: &E, case: &Case, steps: usize) -> Result<Outcome, LaunchError> {
    let shape = Shape3::new(case.global).halo(2);
    let shape32 = Shape3::new(case.global).halo(1);
    let mut rng = SplitMix64::new(case.seed);
    let u0 = Field3::from_fn(shape, |_| rng.uniform(-1.0, 1.0));
    let v0 = Field3::from_fn(shape32, |_| rng.uniform(-1.0, 1.0) as f32);
    let (mut u, mut v) = (exec.upload(&u0)?, exec.upload(&v0)?);
    let (mut w, mut out, mut v_out) = (exec.alloc(shape)?, exec.alloc(shape)?, exec.alloc(shape32)?);
    let interior = Loop3D::interior(&shape);
    let (b, e) = case.damped;
    let damped = Loop3D::from_bounds(shape.extent(), b.map(|x| x + 2), e.map(|x| x + 2)).expect("inside");
    // `v`'s halo keeps its values (a fixed boundary).
    exec.declare_boundary(&mut v, [None; 3])?;
    exec.declare_boundary(&mut v_out, [None; 3])?;
    if case.declare {
        exec.declare_boundary(&mut u, case.fills())?;
        exec.declare_boundary(&mut out, case.fills())?;
    }
    let mut peaks = Vec::new();
    let mut probes = Vec::new();
    let bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect::<Vec<u64>>();
    for _ in 0..steps {
        if !case.declare {
            exec.fill_halos(&mut [(&mut u, case.fills())])?;
        }
        probes.push(bits(exec.read_range(&u, &Loop3D::whole(&shape))?));
        exec.run(&interior, Star13, (0.05, &u, &mut w))?;
        exec.run(&interior, Corners, (&w, &u, &mut out))?;
        std::mem::swap(&mut u, &mut out);
        exec.run(&damped, Damp, (0.75, &mut u))?;
        exec.run(&Loop3D::interior(&shape32), Smooth32, (&v, &mut v_out))?;
        std::mem::swap(&mut v, &mut v_out);
        let mut m = Max::new();
        exec.run(&interior, Peak, (&u, &mut m))?;
        peaks.push(m.get());
        probes.push(bits(exec.read_range(&u, &damped)?));
    }
    Ok(Outcome { u: exec.download(&u)?, v: exec.download(&v)?, peaks, probes })
}

/// Bits of a field's interior.
pub fn interior_bits<T: Element + Into<f64>>(f: &Field<T, 3>) -> Vec<u64> {
    f.read_range(&Loop3D::interior(f.shape())).expect("interior").into_iter().map(|x| x.into().to_bits()).collect()
}

/// Runs `case` on `domains` (the executors of this process's subdomains) in every overlap mode,
/// with and without a host thread per subdomain, and compares with one host domain; returns the points compared. On ranks other than 0 the
/// comparison is of what every rank downloads.
pub fn check<E: Executor>(domains: Domains<E, 3>, case: &Case, steps: usize) -> Result<usize, String> {
    let one = model(&Host, case, steps).map_err(|e| e.to_string())?;
    let mut compared = 0;
    let threaded = domains.clone().with_host_threads().map_err(|e| e.to_string())?;
    let modes = [Overlap::None, Overlap::OneDivided, Overlap::TwoDivided, Overlap::Auto];
    for (domains, overlap) in modes.map(|m| (&domains, m)).into_iter().chain(modes.map(|m| (&threaded, m))) {
        let exec = Distributed::new(domains.clone()).with_overlap(overlap).map_err(|e| e.to_string())?;
        let threads = if domains.host_threads() { ", a host thread per subdomain" } else { "" };
        let many = model(&exec, case, steps).map_err(|e| format!("{case:?}, {overlap:?}{threads}: {e}"))?;
        if interior_bits(&many.u) != interior_bits(&one.u) || interior_bits(&many.v) != interior_bits(&one.v) {
            return Err(format!("{case:?}, {overlap:?}{threads}: the distributed run differs from one domain"));
        }
        // The download holds the global halo too (from the parts next to the grid's edge).
        let whole = |f: &Field<f64, 3>| -> Vec<u64> {
            f.read_range(&Loop3D::whole(f.shape())).expect("whole").into_iter().map(f64::to_bits).collect()
        };
        if whole(&many.u) != whole(&one.u) {
            return Err(format!("{case:?}, {overlap:?}{threads}: the downloaded halo differs from one domain's"));
        }
        if many.peaks.iter().map(|p| p.to_bits()).ne(one.peaks.iter().map(|p| p.to_bits())) {
            return Err(format!("{case:?}, {overlap:?}{threads}: reductions {:?} vs {:?}", many.peaks, one.peaks));
        }
        if let Some(s) = (0..one.probes.len()).find(|&s| many.probes[s] != one.probes[s]) {
            return Err(format!("{case:?}, {overlap:?}{threads}: read_range {s} (step {}) differs", s / 2));
        }
        compared += 2 * case.global.iter().product::<usize>();
    }
    Ok(compared)
}

/// `u + v + x`, the three outputs of [`forked`]'s handles.
#[stencil]
pub fn sum3(idx: Idx3, u: &Field3<f64>, v: &Field3<f64>, x: &Field3<f64>, a: &mut Field3<f64>) {
    a[idx] = 0.5 * u[idx] + 0.25 * v[idx] + 0.25 * x[idx];
}

/// `steps` steps of a fork of three handles and a step after it, on `global` points with random
/// values (`seed`), periodic: handle 0 first keeps its executor busy (`busy` launches on a field
/// of their own that need no halo) and then updates `u` from `a` (read at offsets, stale:
/// exchanged for it, after the busy work on a distributed executor), handle 1 `v` from `b`
/// (likewise), handle 2 `w` from `a` (exchanged already: on a distributed executor it runs on its
/// side handles, and must wait for that exchange) and then `x` from `w` (stale: exchanged for
/// it). After the fork, `a` from `u`, `v` and `x`, and `b` damped. Returns the bits of `a` and
/// `b` (interior), which every executor must give alike, whatever `busy`.
pub fn forked<E: Executor>(
    exec: &E,
    global: [usize; 3],
    busy: usize,
    seed: u64,
    steps: usize,
) -> Result<Vec<u64>, LaunchError> {
    let shape = Shape3::new(global).halo(2);
    let mut rng = SplitMix64::new(seed);
    let mut random = || exec.upload(&Field3::from_fn(shape, |_| rng.uniform(-1.0, 1.0)));
    let (mut a, mut b) = (random()?, random()?);
    let (mut u, mut v, mut w, mut x) = (random()?, random()?, random()?, random()?);
    let fills = [Some(HaloFill::Periodic); 3];
    for f in [&mut a, &mut b, &mut u, &mut v, &mut w, &mut x] {
        exec.declare_boundary(f, fills)?;
    }
    let interior = Loop3D::interior(&shape);
    let mut y = exec.upload(&Field3::filled(shape, 1.0))?;
    for _ in 0..steps {
        exec.fork_join(3, |h| {
            for _ in 0..busy {
                h[0].run(&interior, Damp, (1.0, &mut y))?;
            }
            h[0].run(&interior, Star13, (0.05, &a, &mut u))?;
            h[1].run(&interior, Star13, (0.07, &b, &mut v))?;
            h[2].run(&interior, Star13, (0.03, &a, &mut w))?;
            h[2].run(&interior, Star13, (0.02, &w, &mut x))
        })?;
        exec.run(&interior, Sum3, (&u, &v, &x, &mut a))?;
        exec.run(&interior, Damp, (0.9, &mut b))?;
    }
    let bits = |f: Field3<f64>| interior_bits(&f);
    Ok([bits(exec.download(&a)?), bits(exec.download(&b)?)].concat())
}
