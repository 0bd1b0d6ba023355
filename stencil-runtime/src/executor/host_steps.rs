//! Several time steps per pass over the grid on the host (temporal blocking):
//! [`Host::run_steps_with`] for a pair of fields, [`Host::run_leapfrog_with`] for three.
//!
//! A pass runs `k` steps as a wavefront along the outer axis (the slowest in memory): in each
//! stage the first step advances by a slab of planes and every later step follows as far as the
//! step before it allows, `r` planes behind it (`r` the reach of the stencil's reads along that
//! axis). The planes a step reads were written a stage or two before, so they come from the
//! cache, and the fields pass through memory about once per pass instead of once per step.
//! Every point is computed by the same code from the same values as in single steps: the fields
//! end bit for bit as single steps leave them.

use super::{Executor, Host, Stencil};
use crate::error::LaunchError;
use crate::field::{Element, Field};
use crate::gpu::steps::StepPairError;
use crate::range::Loop;
use crate::stencil::args::ArgValue;
use std::fmt;
use stencil_codegen::analysis::Analysis;
use stencil_codegen::ir::ParamKind;

/// How [`Host::run_steps_with`] and [`Host::run_leapfrog_with`] run several steps per pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HostTiling {
    /// Steps per pass over the grid (at least 1).
    pub steps: usize,
    /// Planes of the outer axis the first step of a pass advances per stage; 0 chooses them from
    /// the cache sizes (a slab and the planes around it that a step reads, of every field, fit
    /// in half the cache the process can count on, [`crate::cpu::Caches::llc_share`]).
    pub planes: usize,
    /// Rows of the middle axis per band (3D). A pass with bands runs band after band, each
    /// step's band leaning back by the reach along the middle axis, so that the planes in flight
    /// are a band's and can stay in the cores' own caches where whole planes would not. 0
    /// chooses: bands only where a slab of whole planes as thick as the reach does not fit in
    /// the cache share above, as wide as fits in twice the cores' L2 (with `planes` 0 the slab
    /// is then sized against half of it); `usize::MAX`: never bands. A band is at least as wide
    /// as the steps of a pass lean back.
    pub rows: usize,
}

impl HostTiling {
    /// `steps` steps per pass, the slab chosen from the cache sizes.
    pub fn new(steps: usize) -> Self {
        HostTiling { steps, planes: 0, rows: 0 }
    }

    /// The same with `planes` planes per stage.
    pub fn planes(self, planes: usize) -> Self {
        HostTiling { planes, ..self }
    }

    /// The same in bands of `rows` rows of the middle axis (3D; `usize::MAX`: no bands).
    pub fn rows(self, rows: usize) -> Self {
        HostTiling { rows, ..self }
    }
}

impl fmt::Display for HostTiling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} steps per pass", self.steps)?;
        if self.planes > 0 {
            write!(f, ", {} planes per stage", self.planes)?;
        }
        if self.rows > 0 {
            write!(f, ", bands of {} rows", self.rows)?;
        }
        Ok(())
    }
}

impl Host {
    /// `per_pass` steps per pass as a tiling: `None` (one step per launch) for 0 and 1.
    pub(crate) fn passes_of(per_pass: usize) -> Option<HostTiling> {
        (per_pass > 1).then(|| HostTiling::new(per_pass))
    }

    /// [`Executor::run_steps`] with a choice of pass: `Some(tiling)` computes up to
    /// `tiling.steps` steps per pass over the grid (temporal blocking, see [`HostTiling`]), `None`
    /// runs the steps one by one. Either way both fields end bit for bit as `steps` single
    /// launches, each followed by `std::mem::swap(a, b)`, leave them: `a` holds the last step,
    /// `b` the one before.
    ///
    /// Several steps per pass need a stencil that reads the pair's first field (`&`), writes the
    /// second (`&mut`) and no other field, does not read the field it writes and has no
    /// reduction, and fields of the pair without a declared boundary (halos hold their values
    /// for all the steps, as in `run_steps`); otherwise [`LaunchError::StepPair`] says which.
    /// Pays off where the fields do not fit in the cache (a 7-point stencil on 256³ f32 on a
    /// CPU with a 32 MiB last level: see the CPU performance page).
    #[allow(clippy::too_many_arguments)]
    pub fn run_steps_with<S, T, X, A, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        steps: usize,
        tiling: Option<HostTiling>,
        pair: (&mut Field<T, D>, &mut Field<T, D>),
        fixed: &X,
        args: A,
    ) -> Result<(), LaunchError>
    where
        S: Stencil<D>,
        T: Element,
        X: ?Sized,
        A: for<'f> Fn(&'f Field<T, D>, &'f mut Field<T, D>, &'f X) -> S::Args<'f, Host>,
    {
        let (a, b) = pair;
        let mut slots = [a, b];
        rotate::<S, T, X, D>(range, stencil, steps, tiling, &mut slots, fixed, &|ins, out, fixed| {
            args(ins[0], out, fixed)
        })
    }

    /// Three time levels rotating (the leapfrog of a second-order wave equation): the same as
    /// `steps` calls of `run(range, stencil, args(&u, &u_prev, &mut u_next, fixed))`, each
    /// followed by `(u_prev, u, u_next) = (u, u_next, u_prev)` (two `std::mem::swap`s), with the
    /// fields given as `(u_prev, u, u_next)`; `tiling` as in [`Host::run_steps_with`], whose
    /// conditions hold with `u` and `u_prev` read and `u_next` written.
    #[allow(clippy::too_many_arguments)]
    pub fn run_leapfrog_with<S, T, X, A, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        steps: usize,
        tiling: Option<HostTiling>,
        levels: (&mut Field<T, D>, &mut Field<T, D>, &mut Field<T, D>),
        fixed: &X,
        args: A,
    ) -> Result<(), LaunchError>
    where
        S: Stencil<D>,
        T: Element,
        X: ?Sized,
        A: for<'f> Fn(&'f Field<T, D>, &'f Field<T, D>, &'f mut Field<T, D>, &'f X) -> S::Args<'f, Host>,
    {
        let (u_prev, u, u_next) = levels;
        let mut slots = [u_prev, u, u_next];
        rotate::<S, T, X, D>(range, stencil, steps, tiling, &mut slots, fixed, &|ins, out, fixed| {
            args(ins[0], ins[1], out, fixed)
        })
    }
}

/// One step's arguments from its inputs (the newest first) and its output.
type Bind<'b, S, T, X, const D: usize> =
    dyn for<'f> Fn(&[&'f Field<T, D>], &'f mut Field<T, D>, &'f X) -> <S as Stencil<D>>::Args<'f, Host> + 'b;

/// Runs `steps` steps of a rotation of `k = slots.len()` fields. Time level `t` lives in slot
/// `t % k`; levels `0 ..= k − 2` are given (the newest last) and step `s` writes level
/// `k − 1 + s` from the `k − 1` levels before it. At the end the slots' contents are rotated so
/// that they hold what single steps with a rotation of the fields after each leave there.
fn rotate<S: Stencil<D>, T: Element, X: ?Sized, const D: usize>(
    range: &Loop<D>,
    stencil: S,
    steps: usize,
    tiling: Option<HostTiling>,
    slots: &mut [&mut Field<T, D>],
    fixed: &X,
    bind: &Bind<'_, S, T, X, D>,
) -> Result<(), LaunchError> {
    let k = slots.len();
    let step = |slots: &mut [&mut Field<T, D>], s: usize, on: &Loop<D>| -> Result<(), LaunchError> {
        let (ins, out) = roles(slots, s);
        Host.run(on, stencil, bind(&ins, out, fixed))
    };
    let plan = match tiling {
        Some(tiling) => Some(check::<S, T, X, D>(tiling, slots, fixed, bind)?),
        _ => None,
    }
    // A range without points (empty, or inverted, which a launch refuses) goes one launch per step,
    // so that it fails or passes exactly as single steps do.
    .filter(|_| range.points() > 0);
    match plan {
        None => {
            for s in 0..steps {
                step(slots, s, range)?;
            }
        }
        Some(Wavefront { axis, reach, per_pass, planes, band }) => {
            // The launches of a pass cover the same tiles: keep each on the core that last had it
            // (also where `STENCIL_CPU_TASKS=shared` asks otherwise for single launches).
            let _affine = crate::cpu::affine_tasks();
            let mut first = 0;
            while first < steps {
                let count = per_pass.min(steps - first);
                for_bands(range, band, count, |bounds| {
                    wavefront(range, &bounds, axis, reach, count, planes, |j, slab| step(slots, first + j, slab))
                })?;
                first += count;
            }
        }
    }
    // Single steps rotate the fields after each step: by `steps` places in all.
    for _ in 0..steps % k {
        for i in 0..k - 1 {
            let (lo, hi) = slots.split_at_mut(i + 1);
            std::mem::swap(&mut *lo[i], &mut *hi[0]);
        }
    }
    Ok(())
}

/// Step `s`'s inputs (the newest first) and output among the slots.
fn roles<'s, T: Element, const D: usize>(
    slots: &'s mut [&mut Field<T, D>],
    s: usize,
) -> (Vec<&'s Field<T, D>>, &'s mut Field<T, D>) {
    let k = slots.len();
    let out_slot = (k - 1 + s) % k;
    let mut out = None;
    let mut by_slot: Vec<Option<&'s Field<T, D>>> = vec![None; k];
    for (i, f) in slots.iter_mut().enumerate() {
        if i == out_slot {
            out = Some(&mut **f);
        } else {
            by_slot[i] = Some(&**f);
        }
    }
    let ins = (1..k).map(|back| by_slot[(out_slot + k - back) % k].expect("an input slot")).collect();
    (ins, out.expect("the output slot"))
}

/// What a pass needs to know.
struct Wavefront {
    /// The axis the wavefront moves along.
    axis: usize,
    /// How far the stencil reads along it.
    reach: usize,
    /// Steps per pass.
    per_pass: usize,
    /// Planes per stage.
    planes: usize,
    /// Bands along another axis, if any.
    band: Option<Band>,
}

/// Bands of a pass: along `axis`, `rows` wide, each step's band `reach` before the last one's.
#[derive(Clone, Copy, Debug)]
struct Band {
    axis: usize,
    reach: usize,
    rows: usize,
}

/// Checks that the stencil and the rotation can run several steps per pass, and plans the pass.
fn check<S: Stencil<D>, T: Element, X: ?Sized, const D: usize>(
    tiling: HostTiling,
    slots: &mut [&mut Field<T, D>],
    fixed: &X,
    bind: &Bind<'_, S, T, X, D>,
) -> Result<Wavefront, LaunchError> {
    let refuse = |reason: StepPairError| LaunchError::StepPair { stencil: S::INFO.name, reason };
    if tiling.steps == 0 {
        return Err(refuse(StepPairError::NoSteps));
    }
    if slots.iter().any(|f| f.declared().is_some_and(|fills| fills.iter().any(Option::is_some))) {
        return Err(refuse(StepPairError::HostDeclaredBoundary { steps: tiling.steps }));
    }
    let k = slots.len();
    let addresses: Vec<u64> = slots.iter().map(|f| f.as_slice().as_ptr() as u64).collect();
    let shape = *slots[0].shape();
    let out_slot = k - 1;
    let (ins, out) = roles(slots, 0);
    let values = S::erase_args::<Host>(bind(&ins, out, fixed));
    let ir = S::ir();
    let name = |p: usize| ir.params[p].name.clone();
    let writable = |p: usize| matches!(ir.params[p].kind, ParamKind::Field(f) if f.writable);
    let passed = |address: u64| -> Vec<usize> {
        values
            .iter()
            .enumerate()
            .filter(|(_, v)| matches!(v, ArgValue::Field { ptr, .. } if *ptr == address))
            .map(|(p, _)| p)
            .collect()
    };
    let mut inputs = Vec::new();
    let mut output = 0;
    // The output first, then the inputs from the newest.
    for (position, slot) in std::iter::once(out_slot).chain((1..k).map(|back| (out_slot + k - back) % k)).enumerate() {
        let params = passed(addresses[slot]);
        let writes = position == 0;
        match params.as_slice() {
            &[p] if writable(p) == writes => {
                if writes {
                    output = p;
                } else {
                    inputs.push(p);
                }
            }
            _ => {
                return Err(refuse(StepPairError::Passed {
                    position,
                    of: k,
                    params: params.into_iter().map(name).collect(),
                }))
            }
        }
    }
    if let Some(p) = ir.params.iter().position(|p| matches!(p.kind, ParamKind::Reduction(_))) {
        return Err(refuse(StepPairError::Reduces { param: name(p) }));
    }
    let access = Analysis::of(ir);
    let of = |p: usize| access.field(p);
    if let Some(other) = access.outputs().find(|a| a.param != output) {
        return Err(refuse(StepPairError::Output { given: name(output), written: other.name.clone() }));
    }
    if of(output).is_read() {
        return Err(refuse(StepPairError::ReadsOutput { param: name(output) }));
    }
    let axes = shape.element_order().axes::<D>();
    let axis = axes[D - 1];
    let reach_along = |axis: usize| {
        inputs.iter().map(|&p| of(p).lo[axis].unsigned_abs().max(of(p).hi[axis].unsigned_abs())).max().unwrap_or(0)
            as usize
    };
    let reach = reach_along(axis);
    let per_pass = tiling.steps;
    let fields = values.iter().filter(|v| matches!(v, ArgValue::Field { .. })).count().max(1);
    let threads = rayon::current_num_threads();
    let caches = crate::cpu::caches();
    let elem = std::mem::size_of::<T>();
    // Planes of a slab and twice the reach (what a step reads of the planes the step before it
    // wrote in the same stage), of every field the launch touches, that fit in `budget` bytes
    // when a plane holds `plane` elements; at least the reach.
    let slab = |budget: usize, plane: usize| (budget / (plane * elem * fields).max(1)).saturating_sub(2 * reach);
    // Whole planes, in half the last level the process can count on.
    let whole = slab(caches.llc_share(threads) / 2, shape.strides()[axis]);
    // Bands of the middle axis where asked, or where a slab of whole planes as thick as the reach
    // does not fit: as wide as fits in twice the cores' own L2 (what a core keeps near it, its
    // L2 and as much of the last level) with a slab as thick as the reach, and at least as wide
    // as the steps of a pass lean back (`per_pass · reach` rows), so every step's band lies in
    // the range the one before it was given.
    let band = match (D, tiling.rows) {
        (3, 0) if whole >= reach => None,
        (3, usize::MAX) | (1 | 2, _) => None,
        (3, rows) => {
            let (axis, reach_b) = (axes[1], reach_along(axes[1]));
            let rows = match rows {
                0 => (2 * caches.l2 * threads / (3 * reach.max(1) * shape.strides()[axis] * elem * fields).max(1))
                    .saturating_sub(2 * reach_b),
                rows => rows,
            };
            Some(Band { axis, reach: reach_b, rows: rows.max(per_pass * reach_b).max(1) })
        }
        _ => None,
    };
    let planes = match (tiling.planes, band) {
        (0, None) => whole.max(reach).max(1),
        // A band's planes, in half the cores' own L2.
        (0, Some(b)) => {
            slab(caches.l2 * threads / 2, (b.rows + 2 * b.reach) * shape.strides()[b.axis]).max(reach).max(1)
        }
        (p, _) => p,
    };
    Ok(Wavefront { axis, reach, per_pass, planes, band })
}

/// Calls `pass(bounds)` for each band of a pass of `count` steps over `range`, in order, where
/// `bounds(j)` is step `j`'s part of the range in that band. Without bands, once with the whole
/// range for every step. With bands along an axis of reach `r`, step `j`'s band starts and ends
/// `j · r` rows before step 0's (the first band starts and the last ends with the range), so step
/// `j` reads only rows that step `j − 1` wrote in this band or an earlier one, and overwrites
/// only rows that the steps before it in later bands no longer read.
fn for_bands<const D: usize>(
    range: &Loop<D>,
    band: Option<Band>,
    count: usize,
    mut pass: impl FnMut(&dyn Fn(usize) -> ([usize; D], [usize; D])) -> Result<(), LaunchError>,
) -> Result<(), LaunchError> {
    let begin = range.begin();
    let end: [usize; D] = std::array::from_fn(|a| begin[a] + range.len_per_axis()[a]);
    let Some(Band { axis, reach, rows }) = band.filter(|b| end[b.axis] - begin[b.axis] > b.rows) else {
        return pass(&|_| (begin, end));
    };
    debug_assert!(rows > count.saturating_sub(1) * reach);
    let (lo, hi) = (begin[axis], end[axis]);
    let bands = (hi - lo).div_ceil(rows);
    for i in 0..bands {
        pass(&|j| {
            let (mut b, mut e) = (begin, end);
            if i > 0 {
                b[axis] = lo + i * rows - j * reach;
            }
            if i + 1 < bands {
                e[axis] = lo + (i + 1) * rows - j * reach;
            }
            (b, e)
        })?;
    }
    Ok(())
}

/// Runs steps `0 .. count` of a pass over `range` as a wavefront along `axis`: `step(j, slab)`
/// computes step `j` on a slab of planes. In each stage step 0 advances by `planes` planes and
/// step `j` up to `reach` planes behind step `j − 1` (all the way once that one is done), so
/// that step `j` reads only planes step `j − 1` has written and overwrites only planes that steps
/// before it no longer read (a step writes the slot of the step `k` before it, which steps
/// `j − k + 1 .. j − 1` read at most `reach` planes ahead of where they are).
fn wavefront<const D: usize>(
    range: &Loop<D>,
    bounds: &dyn Fn(usize) -> ([usize; D], [usize; D]),
    axis: usize,
    reach: usize,
    count: usize,
    planes: usize,
    mut step: impl FnMut(usize, &Loop<D>) -> Result<(), LaunchError>,
) -> Result<(), LaunchError> {
    let (begin, len) = (range.begin(), range.len_per_axis());
    let (lo, hi) = (begin[axis], begin[axis] + len[axis]);
    let mut done = vec![lo; count];
    while done[count - 1] < hi {
        for j in 0..count {
            let to = match j {
                0 => hi.min(done[0] + planes.max(1)),
                _ if done[j - 1] >= hi => hi,
                _ => done[j - 1].saturating_sub(reach),
            };
            if to > done[j] {
                let (mut b, mut e) = bounds(j);
                (b[axis], e[axis]) = (done[j], to);
                step(j, &Loop::within(range.extent(), b, e))?;
                done[j] = to;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{for_bands, wavefront, Band};
    use crate::range::Loop;

    /// Replays a pass's order on a 2D grid of `ny` rows (axis 0, banded when `rows` is given)
    /// and `nz` planes (axis 1, the wavefront's) with a stencil of reach `rb` along the rows and
    /// `rz` along the planes, and checks every read and overwrite against the order single steps
    /// impose: a read finds the step before written there, and an overwrite of the slot of step
    /// `j − k` finds every step that reads it done around the point.
    #[allow(clippy::too_many_arguments)]
    fn order_is_safe(
        ny: usize,
        rb: usize,
        nz: usize,
        rz: usize,
        rows: Option<usize>,
        count: usize,
        planes: usize,
        k: usize,
    ) {
        let range = Loop::<2>::from_parts([ny + 2 * rb, nz + 2 * rz], [rb, rz], [rb, rz]);
        let at = |y: usize, z: usize| y * (nz + 2 * rz) + z;
        // written[t][(y, z)]: level t (0 = the first step's output) written at the point.
        let mut written = vec![vec![false; (ny + 2 * rb) * (nz + 2 * rz)]; count];
        let around = |y: usize, z: usize| {
            let ys = y.saturating_sub(rb).max(rb)..(y + rb + 1).min(ny + rb);
            let zs = z.saturating_sub(rz).max(rz)..(z + rz + 1).min(nz + rz);
            ys.flat_map(move |y| zs.clone().map(move |z| (y, z)))
        };
        let band = rows.map(|rows| Band { axis: 0, reach: rb, rows: rows.max(count * rb).max(1) });
        let mut slabs = 0;
        for_bands(&range, band, count, |bounds| {
            wavefront(&range, bounds, 1, rz, count, planes, |j, slab| {
                slabs += 1;
                let (b, n) = (slab.begin(), slab.len_per_axis());
                for y in b[0]..b[0] + n[0] {
                    for z in b[1]..b[1] + n[1] {
                        for back in 1..k {
                            if j >= back {
                                for (qy, qz) in around(y, z) {
                                    assert!(
                                        written[j - back][at(qy, qz)],
                                        "step {j} read step {} at ({qy}, {qz}) before it was written",
                                        j - back
                                    );
                                }
                            }
                        }
                        for later in (j + 1).saturating_sub(k)..j {
                            assert!(
                                around(y, z).all(|(qy, qz)| written[later][at(qy, qz)]),
                                "step {j} overwrote ({y}, {z}) where step {later} still reads"
                            );
                        }
                        assert!(!written[j][at(y, z)], "({y}, {z}) of step {j} computed twice");
                        written[j][at(y, z)] = true;
                    }
                }
                Ok(())
            })
        })
        .unwrap();
        for (j, w) in written.iter().enumerate() {
            for y in rb..ny + rb {
                assert!((rz..nz + rz).all(|z| w[at(y, z)]), "step {j} left points of row {y} out");
            }
        }
        assert!(slabs >= count);
    }

    #[test]
    fn the_wavefront_reads_only_written_planes_and_overwrites_only_read_ones() {
        for n in [1, 2, 5, 17, 64] {
            for r in 0..=4 {
                for count in 1..=5 {
                    for planes in [1, 2, 3, 8, 100] {
                        for k in [2, 3] {
                            order_is_safe(3, 1, n, r, None, count, planes, k);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn bands_read_only_written_rows_and_overwrite_only_read_ones() {
        for ny in [1, 7, 30] {
            for rb in 0..=3 {
                for rows in [1, 4, 9] {
                    for (nz, rz) in [(6, 1), (11, 2), (3, 0)] {
                        for count in 1..=4 {
                            for planes in [1, 3, 100] {
                                for k in [2, 3] {
                                    order_is_safe(ny, rb, nz, rz, Some(rows), count, planes, k);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
