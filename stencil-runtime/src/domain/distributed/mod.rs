//! [`Distributed`]: the subdomains of a [`Domains`] as one [`Executor`]. A model written against
//! `E: Executor` for one device runs unchanged on N host subdomains, N GPUs of a process or N MPI
//! ranks: its fields are [`DistField`]s of the global grid (one part per local subdomain), its
//! ranges are ranges of the global grid (any sub-range, cut to each part), and halos move by
//! themselves.
//!
//! **Automatic halos.** Each distributed field knows, per axis, how many halo layers hold its
//! neighbours' current values across the cuts between subdomains; a launch that writes it makes
//! that zero. Before a launch, every field the stencil reads at an offset whose halo is not
//! current that deep is exchanged: all such fields of the launch in one message per neighbour and
//! axis, as deep as the stencil's recorded reach needs ([`HaloExchange`] underneath).
//!
//! **The grid's edge** is the model's, as on one device: the boundary a field declares
//! ([`Executor::declare_boundary`]) is asked for after every write of it, and
//! [`Executor::fill_halos`] asks for fills once (`Periodic` for the wrap of an axis the
//! decomposition makes periodic). They are done when a launch first needs them: before the next launch that reads the
//! field at an offset (with the exchange of that launch) or writes it. So the halos, and the
//! results, are those of the single-domain run, bit for bit.
//!
//! **Overlap** ([`Distributed::with_overlap`]): with [`Overlap::OneDivided`], a launch that needs
//! an exchange or a fill runs each part's inner region meanwhile and the slabs next to the
//! exchanged and filled sides after ([`CompCommBinder`] underneath); every mode gives the same
//! bits.
//!
//! # Many GPUs
//!
//! A complete program: a model written once, run on four subdomains, the same bits as one
//! domain (the README's multi-GPU example).
//!
//! ```
//! use stencil_runtime::prelude::*;
//! use stencil_runtime::{Decomposition, Distributed, Overlap};
//!
//! #[stencil]
//! fn diffusion(idx: Idx3, c: f32, u: &Field3<f32>, u_new: &mut Field3<f32>) {
//!     let near = u[idx.ix::<1, 0, 0>()] + u[idx.ix::<-1, 0, 0>()] + u[idx.ix::<0, 1, 0>()]
//!         + u[idx.ix::<0, -1, 0>()] + u[idx.ix::<0, 0, 1>()] + u[idx.ix::<0, 0, -1>()];
//!     u_new[idx] = u[idx] + c * (near - 6.0 * u[idx]);
//! }
//!
//! /// The model, written for one device: no subdomain, halo exchange or message in it.
//! fn diffuse<E: Executor>(exec: &E, u0: &Field3<f32>, steps: usize) -> Result<Field3<f32>, Error> {
//!     let (mut u, mut u_new) = (exec.upload(u0)?, exec.alloc(*u0.shape())?);
//!     let interior = Loop3D::interior(u0.shape());
//!     let walls = [Some(HaloFill::Periodic), Some(HaloFill::Mirror), Some(HaloFill::Mirror)];
//!     exec.declare_boundary(&mut u, walls)?; // the physical boundary, declared once: filled after
//!     exec.declare_boundary(&mut u_new, walls)?; // every write, as on one device
//!     for _ in 0..steps {
//!         exec.run(&interior, Diffusion, (0.1, &u, &mut u_new))?;
//!         std::mem::swap(&mut u, &mut u_new);
//!     }
//!     exec.download(&u)
//! }
//!
//! let n = [96, 64, 48];
//! let u0 = Field3::from_fn(Shape3::new(n).halo(1), |[i, j, k]| ((i * j + k) % 17) as f32);
//! // Four subdomains (the process grid of least halo surface), periodic along x. Halos move before
//! // the launches that read them; with one-divided overlap each part's inner region is updated
//! // while they travel, and the slabs next to the cuts after.
//! let grid = Decomposition::auto(n, 4, [true, false, false], [1; 3])?;
//! let exec = Distributed::host(grid)?.with_overlap(Overlap::OneDivided)?;
//! let (many, one) = (diffuse(&exec, &u0, 50)?, diffuse(&Host, &u0, 50)?);
//! let interior = Loop3D::interior(u0.shape());
//! assert_eq!(many.read_range(&interior)?, one.read_range(&interior)?); // the same bits
//! // The same four subdomains on the GPUs of this process (peer copies between them).
//! #[cfg(feature = "cuda")]
//! if let Ok(gpus) = Distributed::gpus(grid) {
//!     let on_gpus = diffuse(&gpus.with_overlap(Overlap::OneDivided)?, &u0, 50)?;
//!     assert_eq!(on_gpus.read_range(&interior)?, one.read_range(&interior)?);
//! }
//! // Over MPI ranks: Distributed::new(Domains::over_ranks(World::mpi(comm), grid, executors)?).
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod auto;
mod field;
#[cfg(test)]
mod fold_tests;
mod halos;
mod profile;

pub use field::DistField;

use super::binder::{CompCommBinder, Overlap};
use super::decomposition::{Decomposition, Subdomain};
use super::domains::Domains;
use super::exchange::HaloExchange;
use super::refusal::DistributionError;
use super::workers::PerPart;
use super::HeldFold;
use crate::comm::world::World;
use crate::error::LaunchError;
use crate::executor::{
    from_le_bytes, reduce_now, to_le_bytes, BoxPart, Executor, HeldStorage, Host, HostBuffer, HostCopy, Messages,
    PartsHeld, Readback, Record, Reduced, Same, SideJob, Stencil,
};
use crate::field::{Element, Field, HaloFill, Shape};
use crate::range::Loop;
use crate::stencil::args::ArgValue;
use crate::stencil::launch::validate;
use crate::stencil::reduce::{ReduceOp, Reducer};
use crate::stencil::FieldInfo;
use field::{CollectWritten, Head, MarkWritten, Part, Writer};
use halos::Settle;
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use stencil_codegen::printer::cuda::Strategy;

/// Homes ([`FieldStorage::home`](crate::FieldStorage::home)) of distributed fields: one per executor built, far from the
/// host's 0 and the devices' context identifiers.
static NEXT_HOME: AtomicUsize = AtomicUsize::new(0);
const HOME_BASE: usize = usize::MAX / 2;

/// The subdomains of a [`Domains`] as one executor of the global grid (see the module docs).
/// `G` is the dimension of the decomposed grid; its fields are `G`-dimensional.
pub struct Distributed<E: Executor, const G: usize> {
    inner: Arc<Inner<E, G>>,
    /// A handle of [`Executor::fork_join`]: its side handles of the parts' executors.
    lane: Option<Arc<Lane<E>>>,
}

/// A handle of a distributed [`Executor::fork_join`]: a side handle of each part's executor
/// (from that executor's own `fork_join`), how many of the fork's settles it has waited for, and
/// why it can no longer order its work, if it cannot.
struct Lane<E: Executor> {
    execs: Vec<E>,
    seen: AtomicUsize,
    broken: Mutex<Option<String>>,
}

/// The fork in progress: how many times halos were brought up to date on the parts' own
/// executors for one of its handles, and marks on them after the latest time.
struct Fork<E: Executor> {
    settles: usize,
    marks: Vec<E::Mark>,
}

impl<E: Executor> Lane<E> {
    fn new(execs: Vec<E>) -> Self {
        Lane { execs, seen: AtomicUsize::new(0), broken: Mutex::new(None) }
    }

    /// An error once an ordering of this handle's work failed.
    fn check(&self) -> Result<(), LaunchError> {
        match self.broken.lock().map(|b| b.clone()) {
            Ok(None) => Ok(()),
            Ok(Some(error)) => Err(DistributionError::ForkOrder { error }.into()),
            Err(_) => Err(DistributionError::Poisoned.into()),
        }
    }

    /// The parts' own executors `main` wait for this handle's work so far.
    fn hand_over(&self, main: &[E]) -> Result<(), LaunchError> {
        self.check()?;
        for (m, side) in main.iter().zip(&self.execs) {
            m.after(&side.mark()?)?;
        }
        Ok(())
    }

    /// This handle waits for the work of the parts' own executors `main` so far.
    fn take_back(&self, main: &[E]) -> Result<(), LaunchError> {
        for (m, side) in main.iter().zip(&self.execs) {
            side.after(&m.mark()?)?;
        }
        Ok(())
    }

    /// This handle waits for the halos brought up to date for the fork's other handles.
    fn catch_up(&self, fork: Option<&Fork<E>>) -> Result<(), LaunchError> {
        self.check()?;
        let Some(fork) = fork.filter(|f| f.settles > self.seen.load(Ordering::Relaxed)) else { return Ok(()) };
        for (side, mark) in self.execs.iter().zip(&fork.marks) {
            side.after(mark)?;
        }
        self.seen.store(fork.settles, Ordering::Relaxed);
        Ok(())
    }
}

/// Work issued on the parts' own executors for a handle of `fork_join` (nothing on other
/// handles): they wait for the handle's work so far when it starts, and the handle waits for
/// theirs when it ends (dropped; a failure then refuses the handle's later work).
struct OnMain<'a, E: Executor> {
    lane: Option<(&'a Lane<E>, &'a [E])>,
}

impl<'a, E: Executor> OnMain<'a, E> {
    fn start(lane: Option<&'a Lane<E>>, main: &'a [E]) -> Result<Self, LaunchError> {
        if let Some(lane) = lane {
            lane.hand_over(main)?;
        }
        Ok(OnMain { lane: lane.map(|l| (l, main)) })
    }
}

impl<E: Executor> Drop for OnMain<'_, E> {
    fn drop(&mut self) {
        if let Some((lane, main)) = self.lane {
            if let Err(e) = lane.take_back(main) {
                if let Ok(mut broken) = lane.broken.lock() {
                    broken.get_or_insert(e.to_string());
                }
            }
        }
    }
}

/// The executor's state, locked; on a handle of `fork_join`, the call's work runs on the parts'
/// own executors between the handle's earlier and later work ([`OnMain`]).
struct Locked<'a, E: Executor, const G: usize> {
    state: MutexGuard<'a, State<E, G>>,
    _on_main: OnMain<'a, E>,
}

impl<E: Executor, const G: usize> std::ops::Deref for Locked<'_, E, G> {
    type Target = State<E, G>;
    fn deref(&self) -> &State<E, G> {
        &self.state
    }
}

impl<E: Executor, const G: usize> std::ops::DerefMut for Locked<'_, E, G> {
    fn deref_mut(&mut self) -> &mut State<E, G> {
        &mut self.state
    }
}

struct Inner<E: Executor, const G: usize> {
    domains: Domains<E, G>,
    home: usize,
    /// The executor's lock: every call holds it while it works on fields, so that an exchange or
    /// a fill writing the halos of a field that launches read never runs beside another call.
    state: Mutex<State<E, G>>,
}

/// The overlap mode, the exchanges built so far (by their fields' element types and depths and
/// the wrapped axes) and how many ran.
struct State<E: Executor, const G: usize> {
    overlap: Overlap,
    built: HashMap<Vec<(&'static str, [usize; G])>, HaloExchange<E, G>>,
    exchanges: usize,
    /// Two-divided overlap: per written field of a stencil, how deep the next launch read it
    /// at an offset last time (that launch's writer exchanges it itself from then on).
    ahead: HashMap<Writer, Vec<usize>>,
    /// While a step is recorded: the halo tracking of each field as the step first met it.
    journal: Option<Vec<Journaled>>,
    /// [`Overlap::Auto`]: the trials and the choice of each launch site.
    trials: auto::Trials,
    /// `STENCIL_PROFILE=1`: the time of each stencil's launches.
    profile: Option<profile::Profile>,
    /// The [`Executor::fork_join`] in progress, if any.
    fork: Option<Fork<E>>,
}

/// A field's halo tracking as a recorded step first met it: whether the step left it so, and
/// how to put it back.
struct Journaled {
    head: usize,
    unchanged: Box<dyn Fn() -> bool + Send>,
    restore: Box<dyn Fn() + Send>,
}

impl<E: Executor, const G: usize> State<E, G> {
    /// Two-divided launches: records how deep the launches that wrote `read` (the fields a launch
    /// of stencil `stencil_id` reads at an offset) must exchange them ahead, and returns, per
    /// written field of this launch, how deep it must exchange what it writes (`None`: not read
    /// so by a later launch).
    fn learn_early<const D: usize>(
        &mut self,
        read: &[Settle<'_, D>],
        stencil_id: usize,
        written: usize,
    ) -> Vec<Option<Vec<usize>>> {
        for s in read.iter().filter(|s| !s.fill && s.needs_exchange()) {
            if let Some(w) = s.head.writer() {
                let depth = self.ahead.entry(w).or_insert_with(|| vec![0; D]);
                depth.iter_mut().zip(s.depth).for_each(|(d, n)| *d = (*d).max(n));
            }
        }
        (0..written).map(|k| self.ahead.get(&(stencil_id, k)).cloned()).collect()
    }

    /// Notes `head`'s tracking, the first time a recorded step meets it.
    fn journal<const D: usize>(&mut self, head: &Head<D>) {
        let Some(journal) = self.journal.as_mut() else { return };
        let addr = head as *const Head<D> as usize;
        if journal.iter().any(|j| j.head == addr) {
            return;
        }
        let before = head.tracking();
        // SAFETY (both closures): `record` calls them before it returns, while the fields of the
        // step it records are borrowed by the step and alive; the journal is dropped there.
        let head_at = move || unsafe { &*(addr as *const Head<D>) };
        journal.push(Journaled {
            head: addr,
            unchanged: Box::new(move || head_at().tracking() == before),
            restore: Box::new(move || head_at().restore(&before)),
        });
    }
}

impl<E: Executor, const G: usize> Drop for Inner<E, G> {
    /// Prints the profile (`STENCIL_PROFILE=1`) of the launches, if any ran.
    fn drop(&mut self) {
        if let Ok(state) = self.state.get_mut() {
            if let Some(p) = state.profile.as_ref().filter(|p| !p.is_empty()) {
                eprint!("{}", p.table(self.domains.world(), self.domains.execs().len()));
            }
        }
    }
}

impl<E: Executor, const G: usize> Clone for Distributed<E, G> {
    fn clone(&self) -> Self {
        Distributed { inner: Arc::clone(&self.inner), lane: self.lane.clone() }
    }
}

impl<E: Executor, const G: usize> std::fmt::Debug for Distributed<E, G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl<const G: usize> Distributed<Host, G> {
    /// Every subdomain of `decomposition` on the host, in this process.
    pub fn host(decomposition: Decomposition<G>) -> Result<Self, LaunchError> {
        let n = decomposition.len();
        Ok(Self::new(Domains::new(decomposition, vec![Host; n])?))
    }
}

#[cfg(feature = "cuda")]
impl<const G: usize> Distributed<crate::gpu::cuda::Gpu, G> {
    /// Every subdomain of `decomposition` on the GPUs of this process, subdomain `i` on GPU
    /// `i % count` (several subdomains share a GPU when there are more than GPUs; messages
    /// between GPUs are peer copies), each subdomain's work issued from a host thread of its own
    /// ([`Domains::with_host_threads`]).
    pub fn gpus(decomposition: Decomposition<G>) -> Result<Self, LaunchError> {
        use crate::gpu::cuda::Gpu;
        let count = Gpu::count()?;
        if count == 0 {
            return Err(DistributionError::NoGpu.into());
        }
        let gpus = (0..decomposition.len()).map(|i| Gpu::new(i % count)).collect::<Result<Vec<_>, _>>()?;
        Ok(Self::new(Domains::new(decomposition, gpus)?.with_host_threads()?))
    }
}

impl<E: Executor, const G: usize> Distributed<E, G> {
    /// The executor of the subdomains `domains` holds (of every rank of its world: each rank
    /// builds its own and runs the same program), without overlap.
    pub fn new(domains: Domains<E, G>) -> Self {
        let home = HOME_BASE + NEXT_HOME.fetch_add(1, Ordering::Relaxed);
        let state = Mutex::new(State {
            overlap: Overlap::None,
            built: HashMap::new(),
            exchanges: 0,
            ahead: HashMap::new(),
            journal: None,
            trials: auto::Trials::default(),
            profile: profile::wanted().unwrap_or(false).then(profile::Profile::default),
            fork: None,
        });
        Distributed { inner: Arc::new(Inner { domains, home, state }), lane: None }
    }

    /// This executor (and its clones) with `overlap` for the launches that need an exchange or a
    /// fill: [`Overlap::None`] (the default), [`Overlap::OneDivided`], or [`Overlap::TwoDivided`]:
    /// one-divided, and besides, a launch whose written field the next launch read at an offset
    /// last time computes the slabs next to the cuts first and exchanges that field while it
    /// computes its inner region (the data flow is learned from the launches as they run).
    pub fn with_overlap(self, overlap: Overlap) -> Result<Self, LaunchError> {
        self.lock_state()?.overlap = overlap;
        Ok(self)
    }

    /// The overlap mode.
    pub fn overlap(&self) -> Overlap {
        self.lock_state().map_or(Overlap::None, |s| s.overlap)
    }

    /// The overlap modes [`Overlap::Auto`] chose so far, one per launch site (a stencil and its
    /// range) whose trials are over.
    pub fn chosen_overlaps(&self) -> Vec<Overlap> {
        self.lock_state().map_or(Vec::new(), |s| s.trials.chosen())
    }

    /// The subdomains, their executors and the world.
    pub fn domains(&self) -> &Domains<E, G> {
        &self.inner.domains
    }

    /// How many halo exchanges ran so far on this executor and its clones (each moves every field
    /// that one launch needed, in one message per neighbour and axis).
    pub fn exchanges(&self) -> usize {
        self.lock_state().map_or(0, |s| s.exchanges)
    }

    /// The global field's interior on rank 0 (`None` on the other ranks; the halo zero): what
    /// [`Executor::download`] gives without its halo and without sending it to every rank.
    /// Every rank calls it.
    pub fn gather<T: Element, const D: usize>(
        &self,
        field: &DistField<E::Field<T, D>, D>,
    ) -> Result<Option<Field<T, D>>, LaunchError> {
        let domains = self.domains_of::<D>()?;
        let _lock = self.lock()?;
        self.check_home(field.head().home, "gather", "its field")?;
        // SAFETY: the lock is held.
        domains.gather(&field.head().global, unsafe { field.parts_shared() })
    }

    /// The state, locked (no ordering: for calls that issue no work, and for launches, which
    /// order their work themselves).
    fn lock_state(&self) -> Result<MutexGuard<'_, State<E, G>>, LaunchError> {
        self.inner.state.lock().map_err(|_| LaunchError::Decomposition(DistributionError::Poisoned))
    }

    /// The state, locked, for a call whose work runs on the parts' own executors (see [`Locked`]).
    fn lock(&self) -> Result<Locked<'_, E, G>, LaunchError> {
        let state = self.lock_state()?;
        self.in_fork(&state)?;
        let on_main = OnMain::start(self.lane.as_deref(), self.inner.domains.execs())?;
        Ok(Locked { state, _on_main: on_main })
    }

    /// Refuses a handle of a fork used after its `fork_join` returned (its side handles are
    /// joined no more).
    fn in_fork(&self, state: &State<E, G>) -> Result<(), LaunchError> {
        match (&self.lane, &state.fork) {
            (Some(_), None) => {
                Err(DistributionError::ForkOrder { error: "the handle is used after its fork_join returned".into() }
                    .into())
            }
            _ => Ok(()),
        }
    }

    /// On a handle of a fork: marks the parts' own executors after halos were brought up to date
    /// on them; the fork's handles wait for the mark before their next launch on their side
    /// handles.
    fn settled(&self, state: &mut State<E, G>) -> Result<(), LaunchError> {
        let Some(fork) = state.fork.as_mut().filter(|_| self.lane.is_some()) else { return Ok(()) };
        fork.marks = self.inner.domains.execs().iter().map(|e| e.mark()).collect::<Result<_, _>>()?;
        fork.settles += 1;
        Ok(())
    }

    /// The domains seen as `D`-dimensional (they are `G`-dimensional: an error for another `D`).
    fn domains_of<const D: usize>(&self) -> Result<&Domains<E, D>, LaunchError> {
        (&self.inner.domains as &dyn Any)
            .downcast_ref::<Domains<E, D>>()
            .ok_or(LaunchError::Decomposition(DistributionError::Dimensions { field: D, grid: G }))
    }

    fn check_home(&self, home: usize, what: &str, field: &str) -> Result<(), LaunchError> {
        self.check_home_with(home, || (what.to_string(), field.to_string()))
    }

    /// [`Distributed::check_home`] with the names made only for the error.
    fn check_home_with(&self, home: usize, names: impl FnOnce() -> (String, String)) -> Result<(), LaunchError> {
        if home == self.inner.home {
            return Ok(());
        }
        let (what, field) = names();
        Err(DistributionError::ForeignField { call: what, field, executor: self.describe() }.into())
    }

    /// Refuses a global shape that is not the decomposed grid's or whose halo a subdomain is too
    /// thin to fill.
    fn check_global<const D: usize>(
        &self,
        domains: &Domains<E, D>,
        shape: &Shape<D>,
        what: &str,
    ) -> Result<(), LaunchError> {
        let d = domains.decomposition();
        if shape.interior() != d.global() {
            return Err(DistributionError::GlobalShape {
                call: what.into(),
                shape: shape.describe(),
                global: d.global().to_vec(),
            }
            .into());
        }
        let halo = shape.halo_widths();
        for s in d.subdomains() {
            if let Some(a) = (0..D).find(|&a| exchanged(d, a) && s.extent[a] < halo[a]) {
                return Err(DistributionError::ThinForHalo {
                    call: what.into(),
                    subdomain: s.index,
                    axis: a,
                    points: s.extent[a],
                    shape: shape.describe(),
                    halo: halo[a],
                    grid: d.grid().to_vec(),
                }
                .into());
            }
        }
        Ok(())
    }
}

/// Each local part's arguments at once (`Part(i)` of every field), for launches issued from
/// the parts' own host threads.
fn split_args<'a, 'b: 'a, S: Stencil<D>, E: Executor, const G: usize, const D: usize>(
    args: &'a mut S::Args<'b, Distributed<E, G>>,
    parts: usize,
) -> PerPart<S::Args<'a, E>> {
    let args: *mut S::Args<'b, Distributed<E, G>> = args;
    // SAFETY: `Part(i)` reaches part `i` of each field and nothing else (without a reference to
    // the other parts), and scalars are copied: the arguments of different parts share no
    // memory that a launch writes. The launches of a reduction, which share the reduced value,
    // are not split.
    PerPart::new((0..parts).map(|i| S::map_args(unsafe { &mut *args }, &Part(i))).collect())
}

/// Whether the exchange fills halos along axis `a` (a split or periodic axis).
fn exchanged<const D: usize>(d: &Decomposition<D>, a: usize) -> bool {
    d.grid()[a] > 1 || d.periodic()[a]
}

/// A value of a type known to be `B` (the same dimension under another name).
fn same<A: Any + Copy, B: Any + Copy>(a: A) -> B {
    *(&a as &dyn Any).downcast_ref::<B>().expect("the distributed executor checked the dimension")
}

/// The points of a global `range` that subdomain `s` computes, in its part's storage
/// coordinates: those of its interior, and beyond the grid's edge those of the global halo next
/// to it. `None` when there are none.
/// Puts the values of the box `local` (axis 0 fastest) of the subdomain whose interior starts at
/// the global point `offset` into `out`, the values of the global `range`.
fn place<T: Copy, const D: usize>(range: &Loop<D>, offset: [usize; D], local: &Loop<D>, values: &[T], out: &mut [T]) {
    let (begin, len) = (range.begin(), range.len_per_axis());
    let (lb, ll) = (local.begin(), local.len_per_axis());
    for (k, &v) in values.iter().enumerate() {
        let (mut rest, mut at, mut stride) = (k, 0, 1);
        for a in 0..D {
            let g = lb[a] + rest % ll[a] + offset[a];
            rest /= ll[a];
            at += (g - begin[a]) * stride;
            stride *= len[a];
        }
        out[at] = v;
    }
}

fn cut<const D: usize>(range: &Loop<D>, global: &Shape<D>, s: &Subdomain<D>, grid: [usize; D]) -> Option<Loop<D>> {
    let (h, n) = (global.halo_widths(), global.extent());
    let (begin, end) = (range.begin(), range.end());
    let mut lo = [0; D];
    let mut hi = [0; D];
    for a in 0..D {
        let own_lo = if s.coords[a] == 0 { 0 } else { h[a] + s.offset[a] };
        let own_hi = if s.coords[a] + 1 == grid[a] { n[a] } else { h[a] + s.offset[a] + s.extent[a] };
        let (b, e) = (begin[a].max(own_lo), (end[a].max(0) as usize).min(own_hi));
        if b >= e {
            return None;
        }
        (lo[a], hi[a]) = (b - s.offset[a], e - s.offset[a]);
    }
    Some(Loop::within(s.shape(global).extent(), lo, hi))
}

/// Over several ranks, on rank 0: the bytes every other rank sent for its subdomains (`mine` on
/// each, its subdomains' in order, `bytes_of` each), handed to `place` subdomain by subdomain.
/// Every rank calls it.
fn from_other_ranks<const D: usize>(
    world: &super::World,
    d: &Decomposition<D>,
    per_rank: usize,
    mine: &[u8],
    bytes_of: impl Fn(&Subdomain<D>) -> usize,
    mut place: impl FnMut(&Subdomain<D>, &[u8]) -> Result<(), LaunchError>,
) -> Result<(), LaunchError> {
    let Some(all) = world.gather_bytes(mine) else { return Ok(()) };
    for (rank, bytes) in all.iter().enumerate().skip(1) {
        let mut rest = &bytes[..];
        for s in d.subdomains().skip(rank * per_rank).take(per_rank) {
            let (values, tail) = rest.split_at(bytes_of(&s).min(rest.len()));
            rest = tail;
            place(&s, values)?;
        }
    }
    Ok(())
}

/// Rank 0's `values` on every rank.
fn share<T: Element>(world: &super::World, values: &mut [T]) {
    let mut bytes = Vec::new();
    to_le_bytes(values, &mut bytes);
    world.broadcast_bytes(&mut bytes);
    values.copy_from_slice(&from_le_bytes::<T>(&bytes));
}

/// Over several ranks, a reduction's launches over the local parts fold into the identity, and
/// the ranks' results combine into the value it held before.
fn combine_over_ranks(world: &World, prev: f64, r: &mut dyn Reducer) {
    let local = r.value_f64();
    let global = match r.op() {
        ReduceOp::Sum => world.sum(local),
        ReduceOp::Max => world.max(local),
        ReduceOp::Min => -world.max(-local),
    };
    r.reset_value();
    r.fold_f64(prev);
    r.fold_f64(global);
}

/// A launch's fields on the global grid (see `Distributed::launch_fields`).
struct LaunchFields<const D: usize> {
    /// The shape every field has, the launch checked against it.
    global: Shape<D>,
    /// Each field's facts and the address of its `Head`.
    heads: Vec<(&'static FieldInfo, *const Head<D>)>,
    /// Across ranks: each reduction's value before the launch, taken out of it so that the
    /// launch's own contribution can be combined over the ranks first.
    reductions: Vec<f64>,
    /// Whether the stencil reduces.
    reduces: bool,
}

impl<E: Executor, const G: usize> Distributed<E, G> {
    /// A launch's fields, checked to be this executor's, and the launch checks on the global grid
    /// (the errors of a single-domain launch).
    fn launch_fields<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        args: &mut S::Args<'_, Self>,
    ) -> Result<LaunchFields<D>, LaunchError> {
        let domains = self.domains_of::<D>()?;
        let (mut heads, mut reductions, mut reduces) = (Vec::new(), Vec::new(), false);
        let erased = S::erase_args(S::map_args(args, &Same));
        let mut shapes = Vec::new();
        let mut infos = S::INFO.fields.iter();
        for a in erased {
            match a {
                ArgValue::Field { shape, ptr, home } => {
                    let info = infos.next().expect("one FieldInfo per field parameter");
                    let names = || (format!("stencil `{}`", S::INFO.name), format!("field `{}`", info.name));
                    self.check_home_with(home, names)?;
                    shapes.push((info.name, shape));
                    heads.push((info, ptr as *const Head<D>));
                }
                ArgValue::Held { home, .. } => {
                    let names = || (format!("stencil `{}`", S::INFO.name), "a held scalar".to_string());
                    self.check_home_with(home, names)?;
                }
                ArgValue::Reduction(r) => {
                    reduces = true;
                    if domains.world().size() > 1 {
                        reductions.push(r.value_f64());
                        r.reset_value();
                    }
                }
                _ => {}
            }
        }
        let global = validate(range, &S::INFO, &shapes)?;
        Ok(LaunchFields { global, heads, reductions, reduces })
    }

    /// The fields a launch reads at an offset that must be settled first (stale across the cuts,
    /// or with fills pending), one entry per field, as deep as its deepest read.
    fn read_settles<'h, const D: usize>(
        &self,
        range: &Loop<D>,
        heads: &[(&'h FieldInfo, &'h Head<D>)],
        stencil: &'static str,
    ) -> Result<Vec<Settle<'h, D>>, LaunchError> {
        let mut read: Vec<Settle<'h, D>> = Vec::new();
        let d = self.domains_of::<D>()?.decomposition();
        for &(info, head) in heads.iter().filter(|(i, _)| !i.writable) {
            check_edge(d, range, head, info, stencil)?;
            if let Some(s) = Settle::of(self, head, info, stencil, false)? {
                match read.iter_mut().find(|r| std::ptr::eq(r.head, s.head)) {
                    Some(r) => {
                        r.depth = std::array::from_fn(|a| r.depth[a].max(s.depth[a]));
                        r.reach = std::array::from_fn(|a| r.reach[a].max(s.reach[a]));
                    }
                    None => read.push(s),
                }
            }
        }
        Ok(read)
    }
}

impl<E: Executor, const G: usize> Distributed<E, G> {
    /// After a launch's work is issued: its written fields' halos marked stale (those it
    /// exchanged itself, `early`, current that deep), its reductions combined over the ranks, and
    /// its time profiled.
    fn launched<S: Stencil<D>, const D: usize>(
        &self,
        state: &mut State<E, G>,
        args: &mut S::Args<'_, Self>,
        early: &[Option<Vec<usize>>],
        reductions: Vec<f64>,
        timing: Option<profile::Timing>,
    ) -> Result<(), LaunchError> {
        let stencil = S::IR.as_ptr() as usize;
        S::map_args(args, &MarkWritten { stencil, early, next: std::cell::Cell::new(0) });
        let domains = &self.inner.domains;
        if !reductions.is_empty() {
            combine_reductions::<S, Self, D>(domains.world(), reductions, args);
        }
        let exchanges = state.exchanges;
        if let (Some(t), Some(p)) = (timing, state.profile.as_mut()) {
            p.stop(domains.execs(), S::INFO.name, t, exchanges)?;
        }
        Ok(())
    }
}

/// Refuses a read at an offset across the grid's edge (along an axis the decomposition does not
/// wrap) of a field that declares no boundary, was filled by `fill_halos` before and was written
/// since: the halo there is stale (a forgotten fill). A field never filled keeps its halo's
/// values (a fixed boundary), on every executor alike.
fn check_edge<const D: usize>(
    d: &Decomposition<D>,
    range: &Loop<D>,
    head: &Head<D>,
    info: &FieldInfo,
    stencil: &'static str,
) -> Result<(), LaunchError> {
    if range.points() == 0 || head.edge() || head.declared().is_some() || head.pending().is_some() {
        return Ok(());
    }
    let (h, n) = (head.global.halo_widths(), head.global.interior());
    for a in (0..D).filter(|&a| !d.periodic()[a]) {
        let side = if info.lo[a] < 0 && (range.begin()[a] as i64 + info.lo[a] as i64) < h[a] as i64 {
            0
        } else if info.hi[a] > 0 && range.end()[a] as i64 + info.hi[a] as i64 > (h[a] + n[a]) as i64 {
            1
        } else {
            continue;
        };
        return Err(DistributionError::StaleEdge { stencil, field: info.name, axis: a, side }.into());
    }
    Ok(())
}

/// Refuses a column sweep along an axis the decomposition splits: a column must lie in one
/// subdomain.
fn columns_whole<const D: usize>(stencil: &'static str, grid: [usize; D]) -> Result<(), LaunchError> {
    if grid[D - 1] > 1 {
        return Err(DistributionError::SplitColumns { stencil, axis: D - 1, grid: grid.to_vec() }.into());
    }
    Ok(())
}

/// Every reduction of a launch combined over the ranks, then with its value before the launch
/// (`before`, in parameter order).
fn combine_reductions<S: Stencil<D>, X: Executor, const D: usize>(
    world: &World,
    before: Vec<f64>,
    args: &mut S::Args<'_, X>,
) {
    let erased = S::erase_args(S::map_args(args, &Same));
    let mut prev = before.into_iter();
    for a in erased {
        if let ArgValue::Reduction(r) = a {
            combine_over_ranks(world, prev.next().expect("one value per reduction"), r);
        }
    }
}

impl<E: Executor, const G: usize> Executor for Distributed<E, G> {
    type Field<T: Element, const D: usize> = DistField<E::Field<T, D>, D>;
    type HeldScalar<T: Element> = PartsHeld<E::HeldScalar<T>>;

    /// One held scalar per subdomain of this rank, each in its part's memory.
    fn held<T: Element>(&self, value: T) -> Result<Self::HeldScalar<T>, LaunchError> {
        let _order = self.lock()?;
        let execs = self.inner.domains.execs();
        let parts = execs.iter().map(|e| e.held(value)).collect::<Result<_, _>>()?;
        let pieces = execs.iter().map(|e| e.held(value)).collect::<Result<_, _>>()?;
        Ok(PartsHeld { home: self.inner.home, parts, pieces })
    }

    /// Sets every part's copy, each in order after its part's work.
    fn set_held<T: Element>(&self, held: &Self::HeldScalar<T>, value: T) -> Result<(), LaunchError> {
        self.check_home_with(held.home, || ("set_held".into(), "its held scalar".into()))?;
        let _order = self.lock()?;
        self.inner.domains.execs().iter().zip(&held.parts).try_for_each(|(e, h)| e.set_held(h, value))
    }

    /// The first part's copy, read later (every part holds the same).
    fn read_held_later<T: Element>(&self, held: &Self::HeldScalar<T>) -> Result<Readback<T>, LaunchError> {
        self.check_home_with(held.home, || ("read_held_later".into(), "its held scalar".into()))?;
        let _order = self.lock()?;
        match (self.inner.domains.execs().first(), held.parts.first()) {
            (Some(e), Some(h)) => e.read_held_later(h),
            _ => Err(DistributionError::FieldCount {
                call: "read_held_later".into(),
                given: held.parts.len(),
                rank: self.inner.domains.world().rank(),
                local: self.inner.domains.execs().len(),
            }
            .into()),
        }
    }

    /// The value of the first part's copy (every part holds the same).
    fn read_held<T: Element>(&self, held: &Self::HeldScalar<T>) -> Result<T, LaunchError> {
        Ok(self.read_held_later(held)?.wait()?[0][0])
    }

    fn describe(&self) -> String {
        let d = self.inner.domains.decomposition();
        let execs = self.inner.domains.execs();
        format!(
            "{} subdomains of {:?} points (process grid {:?}, periodic {:?}) over {} rank(s); this one holds {} on {}",
            d.len(),
            d.global(),
            d.grid(),
            d.periodic(),
            self.inner.domains.world().size(),
            execs.len(),
            execs.first().map_or_else(|| "nothing".into(), |e| e.describe())
        )
    }

    fn alloc<T: Element, const D: usize>(&self, shape: Shape<D>) -> Result<Self::Field<T, D>, LaunchError> {
        let domains = self.domains_of::<D>()?;
        self.check_global(domains, &shape, "alloc")?;
        let _order = self.lock()?;
        let parts: Result<Vec<_>, _> =
            domains.subdomains().zip(domains.execs()).map(|(s, e)| e.alloc::<T, D>(s.shape(&shape))).collect();
        Ok(DistField::new(self.inner.home, shape, parts?, shape.halo_widths()))
    }

    fn upload<T: Element, const D: usize>(&self, host: &Field<T, D>) -> Result<Self::Field<T, D>, LaunchError> {
        let domains = self.domains_of::<D>()?;
        self.check_global(domains, host.shape(), "upload")?;
        let _order = self.lock()?;
        let parts = domains.scatter(host)?;
        Ok(DistField::new(self.inner.home, *host.shape(), parts, host.shape().halo_widths()))
    }

    /// The global field on every rank, halo included: each point from the part that owns it
    /// (the global halo from the parts next to it, after the fills asked for). Each part is
    /// downloaded whole and its box copied row by row; over ranks, rank 0 assembles the field and
    /// sends it to every rank.
    fn download<T: Element, const D: usize>(&self, field: &Self::Field<T, D>) -> Result<Field<T, D>, LaunchError> {
        let domains = self.domains_of::<D>()?;
        let d = domains.decomposition();
        let mut state = self.lock()?;
        self.check_home(field.head().home, "download", "its field")?;
        self.settle_field(&mut state, field)?;
        let like = field.head().global;
        let whole = Loop::whole(&like);
        let mut global = Field::try_zeros(like)?;
        // Copies the box of `part` (a host copy of subdomain `s`'s part) that `s` owns.
        let place = |s: &Subdomain<D>, part: &Field<T, D>, global: &mut Field<T, D>| -> Result<(), LaunchError> {
            if let Some(local) = cut(&whole, &like, s, d.grid()) {
                let values = part.read_box(local.begin(), local.len_per_axis())?;
                global.write_box(
                    std::array::from_fn(|a| local.begin()[a] + s.offset[a]),
                    local.len_per_axis(),
                    &values,
                )?;
            }
            Ok(())
        };
        // SAFETY: the lock is held.
        let parts = unsafe { field.parts_shared() };
        let mut mine = Vec::new();
        let world = domains.world();
        for ((s, exec), part) in domains.subdomains().zip(domains.execs()).zip(parts) {
            let host = exec.download(part)?;
            place(&s, &host, &mut global)?;
            if world.size() > 1 {
                to_le_bytes(host.as_slice(), &mut mine);
            }
        }
        if world.size() == 1 {
            return Ok(global);
        }
        // Rank 0 places every rank's parts and sends the whole field to every rank.
        let per_rank = domains.execs().len();
        let bytes_of = |s: &Subdomain<D>| s.shape(&like).len() * std::mem::size_of::<T>();
        from_other_ranks(world, d, per_rank, &mine, bytes_of, |s, values| {
            let mut host = Field::try_zeros(s.shape(&like))?;
            host.as_mut_slice().copy_from_slice(&from_le_bytes::<T>(values));
            place(s, &host, &mut global)
        })?;
        share(world, global.as_mut_slice());
        Ok(global)
    }

    /// Copies every part, halos and pending fills included.
    /// Each subdomain's part saved by its executor (halos as they are), no gather.
    fn save<T: Element, const D: usize>(&self, field: &Self::Field<T, D>) -> Result<HostCopy<T, D>, LaunchError> {
        let domains = self.domains_of::<D>()?;
        let mut state = self.lock()?;
        self.check_home(field.head().home, "save", "its field")?;
        self.settle_field(&mut state, field)?;
        // SAFETY: the lock is held and the field is borrowed: nothing changes its parts.
        let parts = unsafe { field.parts_shared() };
        let saved = domains.execs().iter().zip(parts).map(|(e, p)| e.save(p)).collect::<Result<Vec<_>, _>>()?;
        Ok(HostCopy::of_parts(saved))
    }

    /// Each part saved into its earlier copy by its executor.
    fn save_into<T: Element, const D: usize>(
        &self,
        field: &Self::Field<T, D>,
        saved: &mut HostCopy<T, D>,
    ) -> Result<(), LaunchError> {
        let domains = self.domains_of::<D>()?;
        if saved.parts().len() != domains.execs().len() {
            *saved = self.save(field)?;
            return Ok(());
        }
        let mut state = self.lock()?;
        self.check_home(field.head().home, "save", "its field")?;
        self.settle_field(&mut state, field)?;
        // SAFETY: the lock is held and the field is borrowed: nothing changes its parts.
        let parts = unsafe { field.parts_shared() };
        for ((e, p), s) in domains.execs().iter().zip(parts).zip(saved.parts_mut()) {
            e.save_into(p, s)?;
        }
        Ok(())
    }

    /// Each part restored by its executor; the halos exchanged again before they are read.
    fn restore<T: Element, const D: usize>(
        &self,
        field: &mut Self::Field<T, D>,
        saved: &HostCopy<T, D>,
    ) -> Result<(), LaunchError> {
        let domains = self.domains_of::<D>()?;
        let mut state = self.lock()?;
        state.journal(field.head());
        self.check_home(field.head().home, "restore", "its field")?;
        let parts = field.parts_exclusive();
        if saved.parts().len() != parts.len() {
            return Err(LaunchError::CopyShape {
                source_shape: saved.describe(),
                destination_shape: format!("{} parts of {}", parts.len(), field.head().global.describe()),
            });
        }
        for ((e, part), s) in domains.execs().iter().zip(parts.iter_mut()).zip(saved.parts()) {
            e.restore(part, s)?;
        }
        field.head().make_stale();
        Ok(())
    }

    fn copy<T: Element, const D: usize>(
        &self,
        dst: &mut Self::Field<T, D>,
        src: &Self::Field<T, D>,
    ) -> Result<(), LaunchError> {
        let domains = self.domains_of::<D>()?;
        let mut state = self.lock()?;
        state.journal(dst.head());
        self.check_home(dst.head().home, "copy", "the destination")?;
        self.check_home(src.head().home, "copy", "the source")?;
        if dst.head().global != src.head().global {
            return Err(LaunchError::CopyShape {
                source_shape: src.head().global.describe(),
                destination_shape: dst.head().global.describe(),
            });
        }
        // SAFETY: the lock is held; `dst` is another field (it is borrowed mutably).
        let from = unsafe { src.parts_shared() };
        for ((e, d), s) in domains.execs().iter().zip(dst.parts_exclusive().iter_mut()).zip(from) {
            e.copy(d, s)?;
        }
        dst.head().make_stale();
        dst.head().make_current(src.head().depth());
        dst.head().set_pending(src.head().pending());
        dst.head().set_edge(src.head().edge());
        dst.head().ask_declared();
        Ok(())
    }

    /// Each point's values added by the part that owns it (on every rank, each rank adding its
    /// parts' points); the halos count as stale afterwards, as after a launch that writes the
    /// field.
    fn add_at<T: Element, const D: usize>(
        &self,
        field: &mut Self::Field<T, D>,
        points: &[[usize; D]],
        values: &[T],
    ) -> Result<(), LaunchError> {
        let domains = self.domains_of::<D>()?;
        let mut state = self.lock()?;
        state.journal(field.head());
        self.check_home(field.head().home, "add_at", "its field")?;
        let global = field.head().global;
        crate::sparse::add_offsets(&global, points, values.len())?;
        if points.is_empty() {
            return Ok(());
        }
        let h = global.halo_widths();
        for ((s, exec), part) in domains.subdomains().zip(domains.execs()).zip(field.parts_mut()) {
            let owns =
                |p: &[usize; D]| (0..D).all(|a| (h[a] + s.offset[a]..h[a] + s.offset[a] + s.extent[a]).contains(&p[a]));
            let (local, mine): (Vec<[usize; D]>, Vec<T>) = points
                .iter()
                .zip(values)
                .filter(|(p, _)| owns(p))
                .map(|(p, &v)| (std::array::from_fn(|a| p[a] - s.offset[a]), v))
                .unzip();
            if !local.is_empty() {
                exec.add_at(part, &local, &mine)?;
            }
        }
        Ok(())
    }

    /// The values at the points of `range` (a range of the global grid, axis 0 fastest), each read
    /// from the part that owns it (and the global halo from the parts next to it, after the fills
    /// asked for), on every rank: what a receiver or a probe reads each step.
    fn read_range<T: Element, const D: usize>(
        &self,
        field: &Self::Field<T, D>,
        range: &Loop<D>,
    ) -> Result<Vec<T>, LaunchError> {
        let domains = self.domains_of::<D>()?;
        let d = domains.decomposition();
        let mut state = self.lock()?;
        self.check_home(field.head().home, "read_range", "its field")?;
        let global = field.head().global;
        crate::range::row_runs(&global, range).map_err(crate::field::FieldError::Range)?;
        let (begin, end, h) = (range.begin(), range.end(), global.halo_widths());
        let in_halo = (0..D).any(|a| begin[a] < h[a] || end[a] > (h[a] + global.interior()[a]) as isize);
        if in_halo && range.points() > 0 {
            self.settle_field(&mut state, field)?;
        }
        let mut out = vec![T::default(); range.points()];
        let place =
            |s: &Subdomain<D>, local: &Loop<D>, values: &[T], out: &mut [T]| place(range, s.offset, local, values, out);
        // SAFETY: the lock is held.
        let parts = unsafe { field.parts_shared() };
        let mut mine = Vec::new();
        let world = domains.world();
        for ((s, exec), part) in domains.subdomains().zip(domains.execs()).zip(parts) {
            if let Some(local) = cut(range, &global, &s, d.grid()) {
                let values = exec.read_range(part, &local)?;
                place(&s, &local, &values, &mut out);
                if world.size() > 1 {
                    to_le_bytes(&values, &mut mine);
                }
            }
        }
        if world.size() == 1 {
            return Ok(out);
        }
        // Rank 0 places every rank's values and sends the whole range to every rank.
        let per_rank = domains.execs().len();
        let bytes_of =
            |s: &Subdomain<D>| cut(range, &global, s, d.grid()).map_or(0, |l| l.points()) * std::mem::size_of::<T>();
        from_other_ranks(world, d, per_rank, &mine, bytes_of, |s, values| {
            if let Some(local) = cut(range, &global, s, d.grid()) {
                place(s, &local, &from_le_bytes::<T>(values), &mut out);
            }
            Ok(())
        })?;
        share(world, &mut out);
        Ok(out)
    }

    /// In one process, each part's reads are issued on its executor without waiting, and
    /// placed into the global ranges at [`Readback::wait`]. Over several ranks, which share the
    /// values through messages, each range is read at once ([`Executor::read_range`]).
    fn read_ranges_later<T: Element, const D: usize>(
        &self,
        field: &Self::Field<T, D>,
        ranges: &[Loop<D>],
    ) -> Result<Readback<T>, LaunchError> {
        let domains = self.domains_of::<D>()?;
        if domains.world().size() > 1 {
            let values = ranges.iter().map(|r| self.read_range(field, r)).collect::<Result<_, _>>()?;
            return Ok(Readback::ready(values));
        }
        let d = domains.decomposition();
        let mut state = self.lock()?;
        self.check_home(field.head().home, "read_ranges_later", "its field")?;
        let global = field.head().global;
        for range in ranges {
            crate::range::row_runs(&global, range).map_err(crate::field::FieldError::Range)?;
        }
        let h = global.halo_widths();
        let in_halo = |r: &Loop<D>| {
            let (begin, end) = (r.begin(), r.end());
            r.points() > 0 && (0..D).any(|a| begin[a] < h[a] || end[a] > (h[a] + global.interior()[a]) as isize)
        };
        if ranges.iter().any(in_halo) {
            self.settle_field(&mut state, field)?;
        }
        // SAFETY: the lock is held.
        let parts = unsafe { field.parts_shared() };
        // Per part read: its offset and, for each range it holds points of, (range, local box).
        type Layout<const D: usize> = ([usize; D], Vec<(usize, Loop<D>)>);
        let mut reads = Vec::new();
        let mut layout: Vec<Layout<D>> = Vec::new();
        for ((s, exec), part) in domains.subdomains().zip(domains.execs()).zip(parts) {
            let locals: Vec<(usize, Loop<D>)> =
                ranges.iter().enumerate().filter_map(|(i, r)| Some((i, cut(r, &global, &s, d.grid())?))).collect();
            if !locals.is_empty() {
                let boxes: Vec<Loop<D>> = locals.iter().map(|(_, l)| *l).collect();
                reads.push(exec.read_ranges_later(part, &boxes)?);
                layout.push((s.offset, locals));
            }
        }
        let ranges = ranges.to_vec();
        Ok(Readback::join(reads, move |values| {
            let mut out: Vec<Vec<T>> = ranges.iter().map(|r| vec![T::default(); r.points()]).collect();
            for ((offset, locals), values) in layout.iter().zip(values) {
                for ((i, local), v) in locals.iter().zip(values) {
                    place(&ranges[*i], *offset, local, &v, &mut out[*i]);
                }
            }
            Ok(out)
        }))
    }

    /// For a reduction that reads its fields at the point only and writes none, over the
    /// interior, each part reduces into its piece on its executor and nothing waits for the host:
    /// in one process every part then folds all pieces in order into its copy (a GPU waits for
    /// the other parts' streams and reads their pieces itself); between ranks whose messages go
    /// device to device (NCCL), minima and maxima are folded by an all-reduce on the streams.
    /// Otherwise (sums between ranks, host-staged ranks, other stencils) the result is folded on
    /// the host and set on every part.
    fn reduce_into<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        strategy: Option<Strategy>,
        mut args: S::Args<'_, Self>,
        into: &[&Self::HeldScalar<f64>],
    ) -> Result<(), LaunchError> {
        crate::executor::check_into::<S, D>(into.len())?;
        for h in into {
            self.check_home_with(h.home, || {
                (format!("stencil `{}`", S::INFO.name), "reduce_into's held scalar".into())
            })?;
        }
        let domains = self.domains_of::<D>()?;
        let at_the_point = S::INFO.fields.iter().all(|f| !f.writable && f.lo == [0; 3] && f.hi == [0; 3]);
        let simple = at_the_point && S::ir().reduces() && S::ir().sweep.is_none() && self.lane.is_none();
        let on_host = |args| -> Result<(), LaunchError> {
            let values = self.reduce_later(range, stencil, strategy, args)?.values()?;
            into.iter().zip(values).try_for_each(|(h, v)| self.set_held(h, v))
        };
        let ops: Vec<_> = S::ir().reductions().map(|(_, r)| (r.op, r.elem)).collect();
        let min_max = ops.iter().all(|(op, _)| matches!(op, ReduceOp::Min | ReduceOp::Max));
        let transport = domains.device_transport().filter(|_| min_max);
        if !simple || (domains.world().size() > 1 && transport.is_none()) {
            return on_host(args);
        }
        let d = domains.decomposition();
        let _order = self.lock()?;
        let LaunchFields { global, .. } = self.launch_fields::<S, D>(range, &mut args)?;
        let (begin, end, h) = (range.begin(), range.end(), global.halo_widths());
        let inside = (0..D).all(|a| begin[a] >= h[a] && end[a] <= (h[a] + global.interior()[a]) as isize);
        if !inside {
            drop(_order);
            return on_host(args);
        }
        let execs = domains.execs();
        // The pieces are written again only after every part's earlier folds of them.
        let marks = execs.iter().map(|e| e.mark()).collect::<Result<Vec<_>, _>>()?;
        for (q, exec) in execs.iter().enumerate() {
            marks.iter().enumerate().filter(|(p, _)| *p != q).try_for_each(|(_, m)| exec.after(m))?;
        }
        for (i, (s, exec)) in domains.subdomains().zip(execs).enumerate() {
            let pieces: Vec<_> = into.iter().map(|h| &h.pieces[i]).collect();
            match cut(range, &global, &s, d.grid()) {
                Some(local) => {
                    exec.reduce_into(&local, stencil, strategy, S::map_args(&mut args, &Part(i)), &pieces)?
                }
                None => ops
                    .iter()
                    .zip(&pieces)
                    .try_for_each(|(&(op, _), p)| exec.set_held(p, crate::reduce::identity::<f64>(op)))?,
            }
        }
        if let Some(transport) = transport {
            let folds: Vec<HeldFold> = into
                .iter()
                .zip(&ops)
                .flat_map(|(h, &(op, _))| {
                    (0..execs.len()).map(move |i| HeldFold {
                        local: i,
                        piece: h.pieces[i].address(),
                        copy: h.parts[i].address(),
                        op,
                    })
                })
                .collect();
            return transport.all_reduce(&folds);
        }
        for (r, h) in into.iter().enumerate() {
            let sources: Vec<_> = execs.iter().zip(&h.pieces).collect();
            for (exec, part) in execs.iter().zip(&h.parts) {
                exec.fold_held_from(part, ops[r].0, ops[r].1, &sources)?;
            }
        }
        Ok(())
    }

    /// In one process, a reduction that reads its fields at the point only and writes none, over
    /// a range inside the grid's interior, is issued on every part's executor without waiting;
    /// the parts' results are folded in the parts' order, as `run_with` folds them. Other launches,
    /// and launches over several ranks (whose results are combined through messages), run at once.
    fn reduce_later<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        strategy: Option<Strategy>,
        mut args: S::Args<'_, Self>,
    ) -> Result<Reduced, LaunchError> {
        let domains = self.domains_of::<D>()?;
        let at_the_point = S::INFO.fields.iter().all(|f| !f.writable && f.lo == [0; 3] && f.hi == [0; 3]);
        let simple = at_the_point && S::ir().reduces() && S::ir().sweep.is_none();
        if domains.world().size() > 1 || !simple || range.points() == 0 {
            return reduce_now(self, range, stencil, strategy, args);
        }
        let d = domains.decomposition();
        let state = self.lock()?;
        let LaunchFields { global, .. } = self.launch_fields::<S, D>(range, &mut args)?;
        let (begin, end, h) = (range.begin(), range.end(), global.halo_widths());
        let inside = (0..D).all(|a| begin[a] >= h[a] && end[a] <= (h[a] + global.interior()[a]) as isize);
        if !inside || state.journal.is_some() {
            drop(state);
            return reduce_now(self, range, stencil, strategy, args);
        }
        let mut parts = Vec::new();
        for (i, (s, exec)) in domains.subdomains().zip(domains.execs()).enumerate() {
            if let Some(local) = cut(range, &global, &s, d.grid()) {
                parts.push(exec.reduce_later(&local, stencil, strategy, S::map_args(&mut args, &Part(i)))?);
            }
        }
        Ok(Reduced::join::<S, D>(parts))
    }

    fn run_with<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        strategy: Option<Strategy>,
        mut args: S::Args<'_, Self>,
    ) -> Result<(), LaunchError> {
        let _span = tracing::debug_span!(target: "stencil::distributed", "run", stencil = S::INFO.name).entered();
        let domains = self.domains_of::<D>()?;
        let d = domains.decomposition();
        let mut state = self.lock_state()?;
        let lane = self.lane.as_deref();
        self.in_fork(&state)?;
        if let Some(lane) = lane {
            lane.check()?;
        }
        // A step recorded over ranks (their messages through NCCL) holds no host work: a
        // reduction folded between the ranks through MPI makes the step run launch by launch,
        // refused here on every rank alike, before any message.
        #[cfg(feature = "cuda")]
        if S::ir().reduces() && domains.world().size() > 1 && state.journal.is_some() {
            let during = format!("recording stencil `{}` over ranks", S::INFO.name);
            let detail = "its reductions are folded between the ranks on the host".to_string();
            let error = Box::new(crate::gpu::cuda::CudaError::Nccl { during, detail });
            return Err(crate::gpu::cuda::CudaError::NotRecordable { error }.into());
        }
        let LaunchFields { global, heads, reductions, reduces } = self.launch_fields::<S, D>(range, &mut args)?;
        if range.points() == 0 {
            return Ok(());
        }
        if S::ir().sweep.is_some() {
            columns_whole(S::INFO.name, d.grid())?;
        }
        // `STENCIL_PROFILE` with a value it does not take is an error at every launch.
        profile::wanted()?;
        let mut timing = match state.profile {
            Some(_) => Some(profile::start(domains.execs(), state.exchanges)?),
            None => None,
        };
        // SAFETY: each pointer is the address of the `Head` that starts a `DistField` of this
        // executor (its home was checked: only `DistField`s have it), borrowed by `args`.
        let heads: Vec<(&FieldInfo, &Head<D>)> = heads.into_iter().map(|(i, h)| (i, unsafe { &*h })).collect();
        for (_, head) in &heads {
            state.journal(*head);
        }
        // Written fields with fills pending: done now, from the values before this launch, unless
        // the launch stays inside the interior and its write asks again for every pending fill
        // (the declared boundary): then nothing reads those halos before they are filled anew.
        let inside = {
            let (begin, end, h) = (range.begin(), range.end(), global.halo_widths());
            (0..D).all(|a| begin[a] >= h[a] && end[a] <= (h[a] + global.interior()[a]) as isize)
        };
        let mut written = Vec::new();
        let settle_first = |h: &Head<D>| h.pending().is_some() && !(inside && h.pending_asked_again());
        for &(info, head) in heads.iter().filter(|(i, h)| i.writable && settle_first(h)) {
            written.extend(Settle::of(self, head, info, S::INFO.name, true)?);
        }
        let two = state.overlap == Overlap::TwoDivided;
        let stencil_id = S::IR.as_ptr() as usize;
        let written_infos: Vec<&FieldInfo> = S::INFO.fields.iter().filter(|f| f.writable).collect();
        let ranges: Vec<Option<Loop<D>>> = domains.subdomains().map(|s| cut(range, &global, &s, d.grid())).collect();
        let execs = domains.execs();
        // The parts' launches from their own host threads: not a launch that folds into a
        // reduction (every part adds to one value), nor one being recorded.
        let at_once = domains.host_threads() && !reduces && state.journal.is_none();
        let run_parts = |args: &mut S::Args<'_, Self>, execs: &[E], regions: &[Vec<Loop<D>>]| {
            if at_once {
                let parts = split_args::<S, E, G, D>(args, execs.len());
                domains.each_part(&|i| {
                    // SAFETY: part `i`'s arguments, taken by part `i`'s job only.
                    let mut part = unsafe { parts.take(i) };
                    execs[i].run_regions(&regions[i], stencil, strategy, S::map_args(&mut part, &Same))
                })
            } else {
                for (i, (exec, regions)) in execs.iter().zip(regions).enumerate() {
                    exec.run_regions(regions, stencil, strategy, S::map_args(args, &Part(i)))?;
                }
                Ok(())
            }
        };
        // On a handle of a fork: a launch that moves no halo, folds nothing and is not timed runs
        // on the handle's side handles of the parts' executors, beside the other handles' work,
        // after the halos brought up to date for them; any other runs on the parts' own executors,
        // between the handle's earlier and later work (`on_main`).
        let side = lane.filter(|_| {
            written.is_empty()
                && !reduces
                && timing.is_none()
                && !(two && (0..written_infos.len()).any(|k| state.ahead.contains_key(&(stencil_id, k))))
        });
        let side = match side {
            Some(lane) if self.read_settles::<D>(range, &heads, S::INFO.name)?.is_empty() => Some(lane),
            _ => None,
        };
        if let Some(lane) = side {
            lane.catch_up(state.fork.as_ref())?;
            let regions: Vec<Vec<Loop<D>>> = ranges.iter().map(|r| r.iter().copied().collect()).collect();
            run_parts(&mut args, &lane.execs, &regions)?;
            return self.launched::<S, D>(&mut state, &mut args, &[], reductions, timing);
        }
        let _on_main = OnMain::start(lane, execs)?;
        if !written.is_empty() {
            self.settle::<S, D>(&mut state, &mut args, &written)?;
        }
        // Fields read at an offset: stale across the cuts, or with fills pending.
        let read = self.read_settles::<D>(range, &heads, S::INFO.name)?;
        // Two-divided: learn which launch's written field this one reads at an offset, and
        // whether this launch's written fields are read so next (then it exchanges them itself).
        let early = if two { state.learn_early(&read, stencil_id, written_infos.len()) } else { Vec::new() };
        let empty = Loop::within(global.extent(), [0; D], [0; D]);
        let whole: Vec<Loop<D>> = ranges.iter().map(|r| r.unwrap_or(empty)).collect();
        if early.iter().any(Option::is_some) {
            // The reads first; then the slabs next to the cuts, and the inner regions while the
            // fields they wrote travel (as deep as their next reader reads them).
            self.settle::<S, D>(&mut state, &mut args, &read)?;
            let reach: [usize; D] = std::array::from_fn(|a| early.iter().flatten().map(|d| d[a]).max().unwrap_or(0));
            let binder = CompCommBinder::new(domains, whole, reach, Overlap::TwoDivided)?
                .contiguous_axis(global.contiguous_axis());
            binder.step_phases(
                domains,
                &mut args,
                |args, _| {
                    let collect = CollectWritten::<D>(std::cell::RefCell::new(Vec::new()));
                    S::map_args(args, &collect);
                    let heads = collect.0.into_inner();
                    let list: Vec<Settle<'_, D>> = heads
                        .iter()
                        .zip(&early)
                        .zip(&written_infos)
                        .filter_map(|((&h, e), info)| {
                            let e = e.as_ref()?;
                            let depth: [usize; D] = std::array::from_fn(|a| e[a]);
                            // SAFETY: the address of the head of a written field of this launch,
                            // taken just now from its arguments.
                            let head = unsafe { &*h };
                            let name = (info.name, S::INFO.name);
                            Some(Settle { head, depth, wrap: [false; D], fill: false, reach: depth, name })
                        })
                        .collect();
                    let refs: Vec<&Settle<'_, D>> = list.iter().collect();
                    self.exchange(&mut state, &refs, [false; D])?;
                    self.settled(&mut state)
                },
                |args, execs, regions| {
                    for (i, (exec, regions)) in execs.iter().zip(regions).enumerate() {
                        exec.run_regions(regions, stencil, strategy, S::map_args(args, &Part(i)))?;
                    }
                    Ok(())
                },
            )?;
        } else {
            // The mode of this launch: the one asked for, or under `Auto` the site's trial or
            // choice (only a launch that needs an exchange has a choice to make).
            let site = (state.overlap == Overlap::Auto && !read.is_empty()).then(|| auto::site(stencil_id, range));
            let recording = state.journal.is_some();
            let (mode, timed) = match (&site, state.overlap) {
                (Some(site), _) => state.trials.next(site, recording),
                (None, Overlap::None | Overlap::Auto) => (Overlap::None, false),
                (None, Overlap::OneDivided | Overlap::TwoDivided) => (Overlap::OneDivided, false),
            };
            let started = if timed { Some(auto::start(execs)?) } else { None };
            if read.is_empty() || mode == Overlap::None {
                self.settle::<S, D>(&mut state, &mut args, &read)?;
                if let Some(t) = timing.as_mut() {
                    t.settled(execs)?;
                }
                let regions: Vec<Vec<Loop<D>>> = ranges.iter().map(|r| r.iter().copied().collect()).collect();
                run_parts(&mut args, execs, &regions)?;
            } else {
                // Inner regions meanwhile, then the slabs next to the exchanged (and filled) sides.
                let reach: [usize; D] = std::array::from_fn(|a| read.iter().map(|s| s.reach[a]).max().unwrap_or(0));
                let mut binder = CompCommBinder::new(domains, whole, reach, Overlap::OneDivided)?
                    .contiguous_axis(global.contiguous_axis());
                if read.iter().any(|s| s.fill) {
                    binder = binder.filling_boundary();
                }
                binder.step_phases(
                    domains,
                    &mut args,
                    |args, _| self.settle::<S, D>(&mut state, args, &read),
                    |args, execs, regions| run_parts(args, execs, regions),
                )?;
            }
            if let Some(site) = site.filter(|_| !recording) {
                let seconds = started.map(|t| auto::stop(execs, t)).transpose()?;
                state.trials.record(&site, mode, seconds, domains.world());
            }
        }
        let exchanged: &[Option<Vec<usize>>] = if early.iter().any(Option::is_some) { &early } else { &[] };
        self.launched::<S, D>(&mut state, &mut args, exchanged, reductions, timing)
    }

    /// Asks for halo fills, done when a launch first needs them (see the module docs): the
    /// physical-boundary sides of each part as asked, and `Periodic` along an axis the
    /// decomposition makes periodic by the exchange across the wrap. Refused: `Periodic` along a
    /// split axis that the decomposition does not wrap, and other fills along a periodic one.
    fn fill_halo_sides<T: Element, const D: usize>(
        &self,
        jobs: &mut [SideJob<'_, Self::Field<T, D>, D>],
    ) -> Result<(), LaunchError> {
        let domains = self.domains_of::<D>()?;
        let d = domains.decomposition();
        let mut state = self.lock()?;
        for (k, (f, fills)) in jobs.iter().enumerate() {
            self.check_home_with(f.head().home, || ("fill_halos".into(), format!("field {k} of the call")))?;
            check_fills(d, fills, || format!("fill_halos: field {k} of the call"))?;
        }
        for (f, fills) in jobs.iter() {
            state.journal(f.head());
            f.head().ask(*fills);
        }
        Ok(())
    }

    /// Checks the fills against the decomposition's periodicity, as `fill_halos` does.
    fn declare_boundary<T: Element, const D: usize>(
        &self,
        field: &mut Self::Field<T, D>,
        fills: [Option<HaloFill>; D],
    ) -> Result<(), LaunchError> {
        let domains = self.domains_of::<D>()?;
        let mut state = self.lock()?;
        self.check_home(field.head().home, "declare_boundary", "its field")?;
        let global = field.head().global;
        for (a, fill) in fills.iter().enumerate() {
            if let Some(fill) = fill {
                crate::field::check_halo(global.interior(), global.halo_widths(), a, *fill)?;
            }
        }
        check_fills(domains.decomposition(), &fills.map(|f| [f; 2]), || "declare_boundary: the field".into())?;
        state.journal(field.head());
        field.head().declare(fills);
        Ok(())
    }

    fn synchronize(&self) -> Result<(), LaunchError> {
        let _lock = self.lock()?;
        self.inner.domains.synchronize()
    }

    /// `n` handles whose launches run side by side, as on one device: handle `k`'s launches run on
    /// side handles of the parts' executors (their own `fork_join`), after everything issued so
    /// far; work issued afterwards waits for all of theirs. A launch on a handle that must bring
    /// halos up to date first (an exchange or a fill), folds a reduction or is profiled, and every
    /// other call on a handle, runs on the parts' own executors between that handle's earlier and
    /// later work, and the other handles' later launches wait for the halos it brought up to
    /// date. Work given to different handles must not write what another reads or writes. On a
    /// handle of a fork, while profiling (`STENCIL_PROFILE=1`) or while another fork runs, the
    /// handles are clones of this executor and run each call in turn.
    fn fork_join<R>(&self, n: usize, work: impl FnOnce(&[Self]) -> Result<R, LaunchError>) -> Result<R, LaunchError> {
        {
            let mut state = self.lock_state()?;
            if self.lane.is_some() || n < 2 || state.fork.is_some() || state.profile.is_some() {
                drop(state);
                return work(&vec![self.clone(); n]);
            }
            state.fork = Some(Fork { settles: 0, marks: Vec::new() });
        }
        let (mut work, mut value) = (Some(work), None);
        let forked = fork_parts(self.inner.domains.execs(), n, &mut Vec::new(), &mut |sides| {
            let handle = |k: usize| Distributed {
                inner: Arc::clone(&self.inner),
                lane: Some(Arc::new(Lane::new(sides.iter().map(|s: &Vec<E>| s[k].clone()).collect()))),
            };
            let handles: Vec<Self> = (0..n).map(handle).collect();
            let work = work.take().ok_or(DistributionError::ForkOrder { error: "the work ran twice".into() })?;
            value = Some(work(&handles)?);
            Ok(())
        });
        let ended = self.lock_state().map(|mut s| s.fork = None);
        forked?;
        ended?;
        value.ok_or_else(|| DistributionError::ForkOrder { error: "the work did not run".into() }.into())
    }
}

impl<E: Executor, const G: usize> Messages for Distributed<E, G> {
    type Buffer = HostBuffer;

    fn alloc_buffer(&self, _bytes: usize) -> Result<HostBuffer, LaunchError> {
        Err(buffers("alloc_buffer"))
    }

    fn pack<const D: usize>(&self, _parts: &[BoxPart<'_, D>], _buffer: &mut HostBuffer) -> Result<(), LaunchError> {
        Err(buffers("pack"))
    }

    fn unpack<const D: usize>(&self, _buffer: &HostBuffer, _parts: &[BoxPart<'_, D>]) -> Result<(), LaunchError> {
        Err(buffers("unpack"))
    }

    fn copy_buffer(&self, _: &mut HostBuffer, _: &Self, _: &HostBuffer, _: usize) -> Result<(), LaunchError> {
        Err(buffers("copy_buffer"))
    }

    fn buffer_to_host(&self, _buffer: &mut HostBuffer, _bytes: usize) -> Result<(), LaunchError> {
        Err(buffers("buffer_to_host"))
    }

    fn buffer_from_host(&self, _buffer: &mut HostBuffer, _bytes: usize) -> Result<(), LaunchError> {
        Err(buffers("buffer_from_host"))
    }

    type Mark = ();

    fn mark(&self) -> Result<(), LaunchError> {
        Err(buffers("mark"))
    }

    fn after(&self, _mark: &()) -> Result<(), LaunchError> {
        Err(buffers("after"))
    }
}

impl<E: Executor, const G: usize> Record for Distributed<E, G> {
    type Recording = E::Recording;

    /// Records the step over every part as one recording of the parts' executors (on GPUs: one
    /// CUDA graph over all the devices of this process, exchanges included), when the step
    /// leaves every field's halo tracking as it found it (so that each replay meets the halos
    /// the recording met: e.g. two steps that swap buffers). Over ranks only where their
    /// messages go device to device (NCCL: the exchanges and the all-reduce of held minima and
    /// maxima are recorded with the kernels, and every rank records the same step); a step that
    /// folds a reduction between the ranks on the host runs launch by launch. Otherwise (ranks
    /// staged through the host) `None`: the caller runs the step each time.
    fn record(
        &self,
        step: &mut dyn FnMut(&Self) -> Result<(), LaunchError>,
    ) -> Result<Option<E::Recording>, LaunchError> {
        let domains = &self.inner.domains;
        if (domains.world().size() > 1 && domains.device_transport().is_none()) || self.lane.is_some() {
            return Ok(None);
        }
        let execs = self.inner.domains.execs();
        self.lock()?.journal = Some(Vec::new());
        let recorded = execs[0].record_group(&execs[1..], &mut || step(self));
        let journal = self.lock()?.journal.take().unwrap_or_default();
        let recording = match recorded {
            Ok(Some(r)) if journal.iter().all(|j| (j.unchanged)()) => return Ok(Some(r)),
            Ok(Some(_)) => "it leaves the halo tracking of a field changed".to_string(),
            Ok(None) => String::new(),
            // Work the parts' executors cannot record (e.g. copies between devices without peer
            // access): the step runs launch by launch.
            #[cfg(feature = "cuda")]
            Err(LaunchError::Cuda(e @ crate::gpu::cuda::CudaError::NotRecordable { .. })) => e.to_string(),
            Err(e) => {
                journal.iter().for_each(|j| (j.restore)());
                return Err(e);
            }
        };
        // Not recordable as one replayable step: the tracking as before, nothing recorded.
        if !recording.is_empty() {
            tracing::debug!(target: "stencil::distributed", "a step runs unrecorded: {recording}");
        }
        journal.iter().for_each(|j| (j.restore)());
        Ok(None)
    }

    fn replay(&self, recording: &E::Recording) -> Result<(), LaunchError> {
        let _order = self.lock()?;
        let execs = self.inner.domains.execs();
        execs[0].replay_group(&execs[1..], recording)
    }
}

/// What [`fork_parts`] runs with the side handles.
type ForkWork<'a, E> = dyn FnMut(&[Vec<E>]) -> Result<(), LaunchError> + 'a;

/// Runs `work` with `n` side handles of every executor (nested [`Executor::fork_join`]s, one per
/// part: `sides[p][k]` is part `p`'s handle `k`).
fn fork_parts<E: Executor>(
    execs: &[E],
    n: usize,
    sides: &mut Vec<Vec<E>>,
    work: &mut ForkWork<'_, E>,
) -> Result<(), LaunchError> {
    match execs.split_first() {
        None => work(sides),
        Some((first, rest)) => first.fork_join(n, |handles| {
            sides.push(handles.to_vec());
            fork_parts(rest, n, sides, work)
        }),
    }
}

/// Refuses `Periodic` along a split axis that the decomposition does not wrap, and other fills
/// along a periodic one; `what` names the call and the field.
fn check_fills<const D: usize>(
    d: &Decomposition<D>,
    fills: &[[Option<HaloFill>; 2]; D],
    what: impl Fn() -> String,
) -> Result<(), LaunchError> {
    for (a, sides) in fills.iter().enumerate() {
        for fill in sides.iter().flatten() {
            let periodic = *fill == HaloFill::Periodic;
            if periodic && d.grid()[a] > 1 && !d.periodic()[a] {
                return Err(DistributionError::PeriodicNotWrapped { what: what(), axis: a, parts: d.grid()[a] }.into());
            }
            if !periodic && d.periodic()[a] {
                return Err(DistributionError::FillOnWrappedAxis { what: what(), axis: a, fill: *fill }.into());
            }
        }
    }
    Ok(())
}

fn buffers(call: &'static str) -> LaunchError {
    DistributionError::Buffers { call }.into()
}
