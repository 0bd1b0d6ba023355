//! ASUCA's `Diffusion3d` (Shimokawabe et al. 2014, section IV.C): the heat equation `u_t = kappa Δu`, the
//! 7-point explicit scheme, a Gaussian in a box against the analytic heat kernel, the halo a fixed
//! zero boundary (`docs/examples/diffusion3d.md`). Written once, against [`Executor`]: [`run`]
//! takes the host ([`Host`]), a GPU or subdomains ([`Distributed`](stencil_runtime::Distributed):
//! host subdomains, GPUs, MPI ranks), and gives the single-domain result bit for bit on each.

use stencil_runtime::io::checkpoint::Checkpoint;
use stencil_runtime::io::IoElement;
use stencil_runtime::prelude::*;
use stencil_runtime::{Decomposition, Element, Executor, HaloWidths, Recorded};

use crate::checkpoint::{self, Error, Plan};
use crate::driver::{self, Identity, Stepping};

/// A field element the example runs in: `f32` ([`Diffusion3d`]) or `f64` ([`Diffusion3dF64`]).
pub trait Real: Element + IoElement + Into<f64> {
    /// The value nearest to `v`.
    fn from_f64(v: f64) -> Self;
    /// One step `f -> f_new` over `range` on `exec` (the stencil's default strategy).
    fn step<E: Executor>(
        exec: &E,
        range: &Loop3D,
        c: &[f64; 7],
        f: &E::Field<Self, 3>,
        f_new: &mut E::Field<Self, 3>,
    ) -> Result<(), LaunchError>;
    /// `steps` steps of the pair (`f` then holds the last), in passes of up to `per_pass` steps
    /// over the grid where `exec` has them ([`Executor::run_steps_in_passes`]).
    fn steps<E: Executor>(
        exec: &E,
        range: &Loop3D,
        c: &[f64; 7],
        steps: usize,
        per_pass: usize,
        pair: (&mut E::Field<Self, 3>, &mut E::Field<Self, 3>),
    ) -> Result<(), LaunchError>;
}

/// The stencil `$name` (functor `$stencil`) of one 7-point step in `$t`, and [`Real`] for `$t`.
macro_rules! diffusion3d {
    ($name:ident, $stencil:ident, $t:ident, $doc:literal) => {
        #[doc = $doc]
        #[stencil]
        pub fn $name(
            idx: Idx3,
            ce: $t,
            cw: $t,
            cn: $t,
            cs: $t,
            ct: $t,
            cb: $t,
            cc: $t,
            f: &Field3<$t>,
            f_new: &mut Field3<$t>,
        ) {
            f_new[idx] = cc * f[idx]
                + ce * f[idx.ix::<1, 0, 0>()]
                + cw * f[idx.ix::<-1, 0, 0>()]
                + cn * f[idx.ix::<0, 1, 0>()]
                + cs * f[idx.ix::<0, -1, 0>()]
                + ct * f[idx.ix::<0, 0, 1>()]
                + cb * f[idx.ix::<0, 0, -1>()];
        }

        impl Real for $t {
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn step<E: Executor>(
                exec: &E,
                range: &Loop3D,
                c: &[f64; 7],
                f: &E::Field<$t, 3>,
                f_new: &mut E::Field<$t, 3>,
            ) -> Result<(), LaunchError> {
                let [ce, cw, cn, cs, ct, cb, cc] = c.map(|c| c as $t);
                exec.run(range, $stencil, (ce, cw, cn, cs, ct, cb, cc, f, f_new))
            }
            fn steps<E: Executor>(
                exec: &E,
                range: &Loop3D,
                c: &[f64; 7],
                steps: usize,
                per_pass: usize,
                pair: (&mut E::Field<$t, 3>, &mut E::Field<$t, 3>),
            ) -> Result<(), LaunchError> {
                let [ce, cw, cn, cs, ct, cb, cc] = c.map(|c| c as $t);
                exec.run_steps_in_passes(range, $stencil, steps, per_pass, pair, &(), |f, f_new, _| {
                    (ce, cw, cn, cs, ct, cb, cc, f, f_new)
                })
            }
        }
    };
}
diffusion3d!(diffusion3d, Diffusion3d, f32, "One explicit step of the 7-point scheme, single precision (ASUCA's).");
diffusion3d!(diffusion3d_f64, Diffusion3dF64, f64, "One explicit step of the 7-point scheme, double precision.");

/// A run of the example: grid, element order, number of steps and time step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Setup {
    /// Interior points per axis.
    pub n: [usize; 3],
    /// Element order of the fields.
    pub order: Order,
    /// Time steps.
    pub steps: usize,
    /// Time step as a fraction of the stability limit `dx^2 / (6 kappa)`.
    pub cfl: f64,
    /// Initial standard deviation of the Gaussian, as a fraction of the shortest side of the box.
    pub sigma0: f64,
    /// Steps per pass over the grid after the plain steps, where the executor has passes (the
    /// host: [`Executor::run_steps_in_passes`]); 1: the recorded pairs. The same bits either way.
    pub pass_steps: usize,
}

/// Diffusivity of every run (the problem is nondimensional: the shortest side of the box is 1).
pub const KAPPA: f64 = 1.0;

/// Plain steps before the recorded pairs of each segment: they compile the kernels, check the
/// launches, settle the halos and hold all 8 of `Overlap::Auto`'s trials (steps 2 to 9).
pub const WARM_UP: usize = 10;

impl Setup {
    /// A cubic grid of `n^3` points, the time step 0.9 of the limit, `sigma0` 0.06 of the box.
    pub fn cube(n: usize, steps: usize) -> Self {
        Setup { n: [n; 3], order: Order::Ijk, steps, cfl: 0.9, sigma0: 0.06, pass_steps: 1 }
    }

    /// Grid spacing, the same on every axis: the shortest side of the box has length 1.
    pub fn dx(&self) -> f64 {
        1.0 / *self.n.iter().min().expect("3 axes") as f64
    }

    /// The time step.
    pub fn dt(&self) -> f64 {
        self.cfl * self.dx().powi(2) / (6.0 * KAPPA)
    }

    /// The fields' shape: the interior plus one ghost layer, in the chosen element order.
    pub fn shape(&self) -> Shape3 {
        Shape3::new(self.n).halo(1).order(self.order)
    }

    /// The coefficients in ASUCA's order `[ce, cw, cn, cs, ct, cb, cc]` (neighbours along `+x`,
    /// `-x`, `+y`, `-y`, `+z`, `-z`, then the point): `kappa dt / dx^2` and `1 - 6 kappa dt / dx^2`.
    pub fn coefficients(&self) -> [f64; 7] {
        let c = KAPPA * self.dt() / self.dx().powi(2);
        [c, c, c, c, c, c, 1.0 - 6.0 * c]
    }

    /// The analytic solution at the centre of cell `g` (global: the interior spans `0 .. n dx`) at
    /// time `t`: the heat kernel centred in the box, of peak 1 at `t = 0` (`t0 = sigma0^2 / 2 kappa`).
    pub fn exact(&self, g: [isize; 3], t: f64) -> f64 {
        let (t0, dx) = (self.sigma0.powi(2) / (2.0 * KAPPA), self.dx());
        let r2: f64 = (0..3).map(|a| ((g[a] as f64 + 0.5) * dx - self.n[a] as f64 * dx / 2.0).powi(2)).sum();
        (t0 / (t0 + t)).powf(1.5) * (-r2 / (4.0 * KAPPA * (t0 + t))).exp()
    }

    /// The initial field: the Gaussian in the interior, zero in the halo (the fixed boundary);
    /// an error when its host memory cannot be had.
    pub fn initial<T: Real>(&self) -> Result<Field3<T>, LaunchError> {
        let inside = |g: [isize; 3]| (0..3).all(|a| g[a] >= 0 && (g[a] as usize) < self.n[a]);
        Ok(Field3::try_from_fn(self.shape(), |g| T::from_f64(if inside(g) { self.exact(g, 0.0) } else { 0.0 }))?)
    }

    /// The largest value of the analytic solution on the ghost layer at time `t` (beside the
    /// middle of a face): how much the zero boundary is off (the peak is 1 at `t = 0`).
    pub fn wall_value(&self, t: f64) -> f64 {
        let beside = |a| std::array::from_fn(|b| if b == a { -1 } else { self.n[b] as isize / 2 });
        (0..3).map(|a| self.exact(beside(a), t)).fold(0.0, f64::max)
    }

    /// The error of `u` against the analytic solution at time `t` over the interior:
    /// `[||u - u_exact||_2 / ||u_exact||_2, max |u - u_exact| / max |u_exact|]`.
    pub fn error<T: Real>(&self, u: &Field3<T>, t: f64) -> [f64; 2] {
        let [nx, ny, nz] = self.n.map(|n| n as isize);
        let (mut diff2, mut exact2, mut max_diff, mut max_exact) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for g in (0..nz).flat_map(|k| (0..ny).flat_map(move |j| (0..nx).map(move |i| [i, j, k]))) {
            let exact = self.exact(g, t);
            let d = u.get(g).expect("interior point").into() - exact;
            (diff2, exact2) = (diff2 + d * d, exact2 + exact * exact);
            (max_diff, max_exact) = (max_diff.max(d.abs()), max_exact.max(exact.abs()));
        }
        [(diff2 / exact2).sqrt(), max_diff / max_exact]
    }

    /// The decomposition of the grid over `domains` subdomains, over process grid `grid` (else the
    /// grid of least halo surface, [`Decomposition::auto`]); no axis is periodic, the halo is [`halo`].
    pub fn decompose(&self, domains: usize, grid: Option<[usize; 3]>) -> Result<Decomposition<3>, Error> {
        Ok(Decomposition::with_grid(self.n, domains, grid, [false; 3], halo()?.0)?)
    }
}

/// The halo the scheme needs: the reach of the stencils' reads of `f` (both precisions).
pub fn halo() -> Result<HaloWidths<3>, Error> {
    Ok(HaloWidths::of::<Diffusion3d>("f")?.read_by::<Diffusion3dF64>("f")?)
}

/// Runs `setup` on `exec` in precision `T` from its initial field or the checkpoint `plan.restart`
/// (of any placement) to step `setup.steps`, checkpointed as `plan` says (`Plan::none()`: not);
/// `after_step(s)` as `advance` says. Returns the final field (on the host) and the first step.
pub fn run<E: Executor, T: Real>(
    exec: &E,
    setup: &Setup,
    plan: &Plan,
    mut after_step: impl FnMut(usize),
) -> Result<(Field3<T>, usize), Error> {
    let settings = vec![("dt", setup.dt()), ("cfl", setup.cfl), ("sigma0", setup.sigma0)];
    let id = Identity { name: "diffusion3d".into(), grid: setup.n.to_vec(), fields: vec!["f"], settings };
    let build = |c: Option<&Checkpoint<'static>>| -> Result<Running<'_, E, T>, Error> {
        let (host, step) = match c {
            Some(c) => (c.field::<T, 3>("f", &setup.shape())?, c.step as usize),
            None => (setup.initial::<T>()?, 0),
        };
        checkpoint::within_run(step, setup.steps)?;
        // Both buffers carry the same (zero) halo, so the boundary stays fixed across swaps.
        Ok(Running { exec, setup, buffers: [exec.upload(&host)?, exec.upload(&host)?], step })
    };
    let (run, first) = driver::run(&id, &Plan { model: id.name.clone(), ..plan.clone() }, build, |s, _| after_step(s))?;
    Ok((exec.download(&run.buffers[0])?, first))
}

/// A run on `E` as the time loop drives it: the two buffers and the steps run.
struct Running<'a, E: Executor, T: Real> {
    exec: &'a E,
    setup: &'a Setup,
    buffers: [E::Field<T, 3>; 2],
    step: usize,
}

impl<E: Executor, T: Real> Stepping for Running<'_, E, T> {
    fn clock(&self) -> (usize, f64) {
        (self.step, self.step as f64 * self.setup.dt())
    }

    fn finished(&self) -> bool {
        self.step >= self.setup.steps
    }

    /// [`WARM_UP`] plain steps (one more for an odd count), then pairs `buffers[0] → buffers[1] →
    /// buffers[0]` replaying one [`Recorded`] pair (a CUDA graph on a GPU), or with
    /// [`Setup::pass_steps`] above 1 the rest in passes ([`Real::steps`]): the bits of plain steps.
    /// `after_step` once a step is issued, and done for the plain steps and the last.
    fn advance(&mut self, steps: usize, after_step: &mut dyn FnMut(usize, f64)) -> Result<(), Error> {
        let (exec, from, dt, steps) = (self.exec, self.step, self.setup.dt(), steps.min(self.setup.steps - self.step));
        let (range, c) = (Loop3D::interior(&self.setup.shape()), self.setup.coefficients());
        let step = |e: &E, f: &E::Field<T, 3>, g: &mut E::Field<T, 3>| T::step(e, &range, &c, f, g);
        let mut done = |k: usize| after_step(from + k, (from + k) as f64 * dt);
        let plain = steps.min(WARM_UP + steps % 2);
        for k in 1..=plain {
            let [a, b] = &mut self.buffers;
            step(exec, a, b)?;
            self.buffers.swap(0, 1);
            exec.synchronize()?;
            done(k);
        }
        if plain < steps && self.setup.pass_steps > 1 {
            let [a, b] = &mut self.buffers;
            T::steps(exec, &range, &c, steps - plain, self.setup.pass_steps, (a, b))?;
            exec.synchronize()?;
            (plain + 1..=steps).for_each(&mut done);
        } else if plain < steps {
            let pair = |e: &E, [a, b]: &mut [E::Field<T, 3>; 2]| step(e, a, b).and_then(|()| step(e, b, a));
            let mut recorded = Recorded::new(exec, &mut self.buffers, pair)?;
            for k in (plain + 2..=steps).step_by(2) {
                recorded.replay()?;
                if k == steps {
                    exec.synchronize()?;
                }
                (k - 1..=k).for_each(&mut done);
            }
        }
        self.step += steps;
        Ok(())
    }

    fn save(&self, id: &Identity, write: &mut dyn FnMut(&Checkpoint<'_>) -> Result<(), Error>) -> Result<(), Error> {
        let f = self.exec.download(&self.buffers[0])?;
        let (step, time) = self.clock();
        write(&checkpoint::snapshot_of(&id.name, step, time, &id.grid, &id.settings, &[("f", &f)])?)
    }
}
