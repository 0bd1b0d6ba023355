//! [`Distributed`]: the subdomains of a [`Domains`] as one [`Executor`]. A model written against
//! `E: Executor` for one device runs unchanged on N host subdomains, N GPUs of a process or N MPI
//! ranks: its fields are [`DistField`]s of the global grid (one part per local subdomain), its
//! ranges are ranges of the global grid (any sub-range, cut to each part), and halos move by
//! themselves.
//!
//! **Automatic halos.** Each distributed field knows, per axis, how many halo layers hold its
//! neighbours' current values; a launch that writes it makes that zero. Before a launch, every
//! field the stencil reads at an offset whose halo is not current that deep is exchanged: all such
//! fields of the launch in one message per neighbour and axis, as deep as the stencil's recorded
//! reach needs ([`HaloExchange`] underneath). The physical boundary is the model's: the same
//! [`Executor::fill_halos`] call as on one device fills it (and exchanges first), so the halos are
//! those of the single-domain run, and so are the results, bit for bit.
//!
//! **Overlap** ([`Distributed::with_overlap`]): with [`Overlap::OneDivided`], a launch that needs
//! an exchange runs each part's inner region during the exchange and its boundary slabs after it
//! ([`CompCommBinder`] underneath); every mode gives the same bits.
//!
//! ```
//! use stencil_runtime::prelude::*;
//! use stencil_runtime::{Decomposition, Distributed};
//!
//! #[stencil]
//! fn smooth(idx: Idx2, u: &Field2<f64>, out: &mut Field2<f64>) {
//!     out[idx] = 0.5 * u[idx] + 0.125 * (u[idx.ix::<1, 0>()] + u[idx.ix::<-1, 0>()] + u[idx.ix::<0, 1>()] + u[idx.ix::<0, -1>()]);
//! }
//!
//! /// Written once for any executor.
//! fn run<E: Executor>(exec: &E, u0: &Field2<f64>, steps: usize) -> Result<Field2<f64>, LaunchError> {
//!     let (mut u, mut out) = (exec.upload(u0)?, exec.alloc(*u0.shape())?);
//!     let range = Loop2D::interior(u0.shape());
//!     for _ in 0..steps {
//!         exec.fill_halos(&mut [(&mut u, [Some(HaloFill::Periodic), None])])?;
//!         exec.run(&range, Smooth, (&u, &mut out))?;
//!         std::mem::swap(&mut u, &mut out);
//!     }
//!     exec.download(&u)
//! }
//!
//! let shape = Shape2::new([40, 30]).halo(1);
//! let u0 = Field2::from_fn(shape, |[i, j]| ((i * 7 + j * 3) % 11) as f64);
//! // Six host subdomains (3 x 2), periodic along x, walled along y.
//! let d = Decomposition::new([40, 30], [3, 2], [true, false], [1, 1])?;
//! let many = run(&Distributed::host(d)?, &u0, 5)?;
//! let one = run(&Host, &u0, 5)?;
//! assert_eq!(many.read_range(&Loop2D::interior(&shape))?, one.read_range(&Loop2D::interior(&shape))?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::binder::{CompCommBinder, Overlap};
use super::decomposition::{Decomposition, Neighbour, Subdomain};
use super::domains::Domains;
use super::exchange::HaloExchange;
use crate::device_args::ArgValue;
use crate::error::LaunchError;
use crate::executor::{
    from_le_bytes, to_le_bytes, BoxPart, ErasedField, Executor, FieldMap, FieldStorage, Host, HostBuffer, Same,
    SideJob, Stencil,
};
use crate::field::{Element, Field, HaloFill, Shape};
use crate::launch::validate;
use crate::range::Loop;
use crate::reduce::{ReduceOp, Reducer};
use crate::stencil::FieldInfo;
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use stencil_codegen::printer::cuda::Strategy;

/// Homes ([`FieldStorage::home`]) of distributed fields: one per executor built, far from the
/// host's 0 and the devices' context identifiers.
static NEXT_HOME: AtomicUsize = AtomicUsize::new(0);
const HOME_BASE: usize = usize::MAX / 2;

/// The subdomains of a [`Domains`] as one executor of the global grid (see the module docs).
/// `G` is the dimension of the decomposed grid; its fields are `G`-dimensional.
pub struct Distributed<E: Executor, const G: usize> {
    inner: Arc<Inner<E, G>>,
}

struct Inner<E: Executor, const G: usize> {
    domains: Domains<E, G>,
    home: usize,
    /// The executor's lock: every call holds it, so that an exchange writing the halos of a field
    /// that launches read never runs beside another call on the same fields.
    state: Mutex<State<E, G>>,
}

/// The overlap mode, the exchanges built so far (by their fields' element types and depths) and
/// how many ran.
struct State<E: Executor, const G: usize> {
    overlap: Overlap,
    built: HashMap<Vec<(&'static str, [usize; G])>, HaloExchange<E, G>>,
    exchanges: usize,
}

impl<E: Executor, const G: usize> Clone for Distributed<E, G> {
    fn clone(&self) -> Self {
        Distributed { inner: Arc::clone(&self.inner) }
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

impl<E: Executor, const G: usize> Distributed<E, G> {
    /// The executor of the subdomains `domains` holds (of every rank of its world: each rank
    /// builds its own and runs the same program), exchanging without overlap.
    pub fn new(domains: Domains<E, G>) -> Self {
        let home = HOME_BASE + NEXT_HOME.fetch_add(1, Ordering::Relaxed);
        let state = Mutex::new(State { overlap: Overlap::None, built: HashMap::new(), exchanges: 0 });
        Distributed { inner: Arc::new(Inner { domains, home, state }) }
    }

    /// This executor (and its clones) with `overlap` for the launches that need an exchange:
    /// [`Overlap::None`] (the default) or [`Overlap::OneDivided`].
    pub fn with_overlap(self, overlap: Overlap) -> Result<Self, LaunchError> {
        if overlap == Overlap::TwoDivided {
            return Err(LaunchError::Decomposition(
                "Distributed::with_overlap(Overlap::TwoDivided): a launch cannot start the exchange its successor needs \
                 yet; choose Overlap::None or Overlap::OneDivided (or a CompCommBinder over the Domains)"
                    .into(),
            ));
        }
        self.lock()?.overlap = overlap;
        Ok(self)
    }

    /// The overlap mode.
    pub fn overlap(&self) -> Overlap {
        self.lock().map_or(Overlap::None, |s| s.overlap)
    }

    /// The subdomains, their executors and the world.
    pub fn domains(&self) -> &Domains<E, G> {
        &self.inner.domains
    }

    /// How many halo exchanges ran so far on this executor and its clones (each moves every field
    /// that one launch or one halo fill needed, in one message per neighbour and axis).
    pub fn exchanges(&self) -> usize {
        self.lock().map_or(0, |s| s.exchanges)
    }

    /// The global field on rank 0 (`None` on the other ranks): [`Executor::download`] without
    /// sending it to every rank. Every rank calls it.
    pub fn gather<T: Element, const D: usize>(
        &self,
        field: &DistField<E::Field<T, D>, D>,
    ) -> Result<Option<Field<T, D>>, LaunchError> {
        let domains = self.domains_of::<D>()?;
        let _lock = self.lock()?;
        self.check_home(field.head.home, "gather", "its field")?;
        domains.gather(&field.head.global, &field.parts)
    }

    fn lock(&self) -> Result<MutexGuard<'_, State<E, G>>, LaunchError> {
        self.inner.state.lock().map_err(|_| {
            LaunchError::Decomposition("the distributed executor: an earlier call panicked while holding it".into())
        })
    }

    /// The domains seen as `D`-dimensional (they are `G`-dimensional: an error for another `D`).
    fn domains_of<const D: usize>(&self) -> Result<&Domains<E, D>, LaunchError> {
        (&self.inner.domains as &dyn Any).downcast_ref::<Domains<E, D>>().ok_or_else(|| {
            LaunchError::Decomposition(format!(
                "a {D}D field or range on a distributed executor of a {G}D grid: distribute {G}D fields only, and keep \
                 fields of other dimensions on the subdomains' executors"
            ))
        })
    }

    fn check_home(&self, home: usize, what: &str, field: &str) -> Result<(), LaunchError> {
        if home == self.inner.home {
            return Ok(());
        }
        Err(LaunchError::Decomposition(format!(
            "{what}: {field} is not a field of this distributed executor ({}): allocate it with this executor's \
             `alloc` or `upload` (fields of another executor or decomposition cannot be mixed)",
            self.describe()
        )))
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
            return Err(LaunchError::Decomposition(format!(
                "{what}: a field of {} on a distributed executor of a grid of {:?} points: give the shape of the whole \
                 grid (its interior {:?}, with the halo the stencils need)",
                shape.describe(),
                d.global(),
                d.global()
            )));
        }
        let halo = shape.halo_widths();
        for s in d.subdomains() {
            if let Some(a) = (0..D).find(|&a| exchanged(d, a) && s.extent[a] < halo[a]) {
                return Err(LaunchError::Decomposition(format!(
                    "{what}: subdomain {} is {} points thick along axis {a}, thinner than the halo of {} ({} points): \
                     split that axis over fewer subdomains (process grid {:?}) or give the field a narrower halo",
                    s.index,
                    s.extent[a],
                    shape.describe(),
                    halo[a],
                    d.grid()
                )));
            }
        }
        Ok(())
    }

    /// Exchanges the halos of `fields` (each with its depth per axis) in one [`HaloExchange`],
    /// across the periodic wrap only on the axes `wrap` names, and records them current that deep
    /// (the cuts between subdomains; the wrap is the grid's edge, filled only when asked, as on one
    /// domain).
    fn exchange<const D: usize>(
        &self,
        state: &mut State<E, G>,
        fields: &[ToExchange<'_, D>],
        wrap: [bool; D],
    ) -> Result<(), LaunchError> {
        let mut key: Vec<(&'static str, [usize; G])> = fields.iter().map(|(h, d, _)| (h.element, same(*d))).collect();
        key.push(("wrap", same(wrap.map(usize::from))));
        let domains = &self.inner.domains;
        let ex = state.built.entry(key).or_insert_with(|| {
            let mut ex = HaloExchange::new(domains);
            ex.set_wrap(same(wrap));
            for (h, depth, name) in fields {
                ex.append_erased(name.clone(), h.element, h.elem_bytes, same(*depth));
            }
            ex
        });
        let mut lists: Vec<Vec<ErasedField<'_, G>>> = (0..domains.execs().len())
            .map(|i| {
                let part = |h: &Head<D>| {
                    let (shape, address, home) = h.parts[i];
                    ErasedField::from_raw(same(shape), address, home, h.element, h.elem_bytes)
                };
                fields.iter().map(|(h, _, _)| part(h)).collect()
            })
            .collect();
        ex.exchange(&mut lists)?;
        state.exchanges += 1;
        for (h, depth, _) in fields {
            h.make_current(*depth);
        }
        Ok(())
    }
}

/// Whether the exchange fills halos along axis `a` (a split or periodic axis).
fn exchanged<const D: usize>(d: &Decomposition<D>, a: usize) -> bool {
    d.grid()[a] > 1 || d.periodic()[a]
}

/// A value of a type known to be `B` (the same dimension under another name).
fn same<A: Any + Copy, B: Any + Copy>(a: A) -> B {
    *(&a as &dyn Any).downcast_ref::<B>().expect("the distributed executor checked the dimension")
}

/// A field to exchange: its head, the depth per axis, and its name for messages.
type ToExchange<'h, const D: usize> = (&'h Head<D>, [usize; D], String);

/// What a distributed field tells the executor without its type: where its parts are and how
/// current their halos are. First in [`DistField`] (`repr(C)`), so that its address is the
/// field's [`FieldStorage::address`].
struct Head<const D: usize> {
    home: usize,
    global: Shape<D>,
    element: &'static str,
    elem_bytes: usize,
    /// Per part: shape, storage address and home.
    parts: Vec<(Shape<D>, u64, usize)>,
    /// Per axis, how many halo layers hold the neighbours' current values.
    current: [AtomicUsize; D],
}

impl<const D: usize> Head<D> {
    fn depth(&self) -> [usize; D] {
        std::array::from_fn(|a| self.current[a].load(Ordering::Relaxed))
    }

    fn make_current(&self, depth: [usize; D]) {
        for (c, d) in self.current.iter().zip(depth) {
            c.fetch_max(d, Ordering::Relaxed);
        }
    }

    fn make_stale(&self) {
        self.current.iter().for_each(|c| c.store(0, Ordering::Relaxed));
    }
}

/// A field of the global grid on a [`Distributed`] executor: one part per local subdomain (each of
/// [`Subdomain::shape`] of the global shape), and how current its halos are.
#[repr(C)]
pub struct DistField<F, const D: usize> {
    head: Head<D>,
    parts: Vec<F>,
}

impl<F, const D: usize> DistField<F, D> {
    fn new<T: Element>(home: usize, global: Shape<D>, parts: Vec<F>, current: [usize; D]) -> Self
    where
        F: FieldStorage<T, D>,
    {
        let views = parts.iter().map(|p| (*p.shape(), p.address(), p.home())).collect();
        let head = Head {
            home,
            global,
            element: T::NAME,
            elem_bytes: std::mem::size_of::<T>(),
            parts: views,
            current: current.map(AtomicUsize::new),
        };
        DistField { head, parts }
    }

    /// The parts, one per local subdomain in order, to change by hand: their halos count as stale
    /// afterwards.
    pub fn parts_mut(&mut self) -> &mut [F] {
        self.head.make_stale();
        &mut self.parts
    }
}

impl<F, const D: usize> std::fmt::Debug for DistField<F, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DistField({} of {}, {} local parts, halo current {:?} deep)",
            self.head.element,
            self.head.global.describe(),
            self.parts.len(),
            self.head.depth()
        )
    }
}

impl<T: Element, F: FieldStorage<T, D>, const D: usize> FieldStorage<T, D> for DistField<F, D> {
    fn shape(&self) -> &Shape<D> {
        &self.head.global
    }
    fn address(&self) -> u64 {
        &self.head as *const Head<D> as u64
    }
    fn home(&self) -> usize {
        self.head.home
    }
}

/// Part `i` of each distributed field.
struct Part(usize);

impl<E: Executor, const G: usize> FieldMap<Distributed<E, G>, E> for Part {
    fn field<'a, T: Element, const D: usize>(&self, f: &'a DistField<E::Field<T, D>, D>) -> &'a E::Field<T, D> {
        &f.parts[self.0]
    }
    fn field_mut<'a, T: Element, const D: usize>(
        &self,
        f: &'a mut DistField<E::Field<T, D>, D>,
    ) -> &'a mut E::Field<T, D> {
        &mut f.parts[self.0]
    }
}

/// Every written field marked stale.
struct MarkWritten;

impl<E: Executor, const G: usize> FieldMap<Distributed<E, G>, Distributed<E, G>> for MarkWritten {
    fn field<'a, T: Element, const D: usize>(
        &self,
        f: &'a DistField<E::Field<T, D>, D>,
    ) -> &'a DistField<E::Field<T, D>, D> {
        f
    }
    fn field_mut<'a, T: Element, const D: usize>(
        &self,
        f: &'a mut DistField<E::Field<T, D>, D>,
    ) -> &'a mut DistField<E::Field<T, D>, D> {
        f.head.make_stale();
        f
    }
}

/// The points of a global `range` that subdomain `s` computes, in its part's storage
/// coordinates: those of its interior, and beyond the grid's edge those of the global halo next
/// to it. `None` when there are none.
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

/// Over several ranks, a reduction's launches over the local parts fold into the identity, and
/// the ranks' results combine into the value it held before.
fn combine_over_ranks(world: &super::World, prev: f64, r: &mut dyn Reducer) {
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

impl<E: Executor, const G: usize> Executor for Distributed<E, G> {
    type Field<T: Element, const D: usize> = DistField<E::Field<T, D>, D>;
    type Recording = ();
    type Buffer = HostBuffer;

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
        let parts: Result<Vec<_>, _> =
            domains.subdomains().zip(domains.execs()).map(|(s, e)| e.alloc::<T, D>(s.shape(&shape))).collect();
        Ok(DistField::new(self.inner.home, shape, parts?, shape.halo_widths()))
    }

    fn upload<T: Element, const D: usize>(&self, host: &Field<T, D>) -> Result<Self::Field<T, D>, LaunchError> {
        let domains = self.domains_of::<D>()?;
        self.check_global(domains, host.shape(), "upload")?;
        let parts = domains.scatter(host)?;
        Ok(DistField::new(self.inner.home, *host.shape(), parts, host.shape().halo_widths()))
    }

    /// The global field on every rank: the interior assembled from the parts, the halo zero.
    fn download<T: Element, const D: usize>(&self, field: &Self::Field<T, D>) -> Result<Field<T, D>, LaunchError> {
        let world = self.inner.domains.world().clone();
        let got = self.gather(field)?;
        if world.size() == 1 {
            return Ok(got.expect("one process is rank 0"));
        }
        let like = field.head.global;
        let (at, extent) = (like.halo_widths(), like.interior());
        let mut bytes = match &got {
            Some(g) => {
                let mut b = Vec::new();
                to_le_bytes(&g.read_box(at, extent)?, &mut b);
                b
            }
            None => vec![0; extent.iter().product::<usize>() * std::mem::size_of::<T>()],
        };
        world.broadcast_bytes(&mut bytes);
        match got {
            Some(g) => Ok(g),
            None => {
                let mut g = Field::try_zeros(like)?;
                g.write_box(at, extent, &from_le_bytes::<T>(&bytes))?;
                Ok(g)
            }
        }
    }

    fn copy<T: Element, const D: usize>(
        &self,
        dst: &mut Self::Field<T, D>,
        src: &Self::Field<T, D>,
    ) -> Result<(), LaunchError> {
        let domains = self.domains_of::<D>()?;
        let _lock = self.lock()?;
        self.check_home(dst.head.home, "copy", "the destination")?;
        self.check_home(src.head.home, "copy", "the source")?;
        if dst.head.global != src.head.global {
            return Err(LaunchError::CopyShape {
                source_shape: src.head.global.describe(),
                destination_shape: dst.head.global.describe(),
            });
        }
        for ((e, d), s) in domains.execs().iter().zip(&mut dst.parts).zip(&src.parts) {
            e.copy(d, s)?;
        }
        dst.head.make_stale();
        dst.head.make_current(src.head.depth());
        Ok(())
    }

    fn read_range<T: Element, const D: usize>(
        &self,
        field: &Self::Field<T, D>,
        range: &Loop<D>,
    ) -> Result<Vec<T>, LaunchError> {
        Ok(self.download(field)?.read_range(range)?)
    }

    fn run_with<S: Stencil<D>, const D: usize>(
        &self,
        range: &Loop<D>,
        stencil: S,
        strategy: Option<Strategy>,
        mut args: S::Args<'_, Self>,
    ) -> Result<(), LaunchError> {
        let domains = self.domains_of::<D>()?;
        let d = domains.decomposition();
        let mut state = self.lock()?;
        // The launch's fields (checked to be this executor's) and the launch checks on the
        // global grid: the errors of a single-domain launch.
        let mut heads: Vec<(&'static FieldInfo, *const Head<D>)> = Vec::new();
        let mut reductions = Vec::new();
        let global = {
            let erased = S::erase_args(S::map_args(&mut args, &Same));
            let mut shapes = Vec::new();
            let mut infos = S::INFO.fields.iter();
            for a in erased {
                match a {
                    ArgValue::Field { shape, ptr, home } => {
                        let info = infos.next().expect("one FieldInfo per field parameter");
                        let what = format!("stencil `{}`", S::INFO.name);
                        self.check_home(home, &what, &format!("field `{}`", info.name))?;
                        shapes.push((info.name, shape));
                        heads.push((info, ptr as *const Head<D>));
                    }
                    ArgValue::Reduction(r) if domains.world().size() > 1 => {
                        reductions.push(r.value_f64());
                        r.reset_value();
                    }
                    _ => {}
                }
            }
            validate(range, &S::INFO, &shapes)?
        };
        if range.points() == 0 {
            return Ok(());
        }
        // The fields read at an offset whose halo is not current as deep as the stencil reaches.
        let mut stale: Vec<ToExchange<'_, D>> = Vec::new();
        for &(info, head) in &heads {
            // SAFETY: `head` is the address of the `Head` that starts a `DistField` of this
            // executor (its home was checked: only `DistField`s have it), borrowed by `args`.
            let head = unsafe { &*head };
            let need: [usize; D] = std::array::from_fn(|a| {
                if info.writable || !exchanged(d, a) {
                    0
                } else {
                    (-info.lo[a]).max(info.hi[a]).max(0) as usize
                }
            });
            let halo = head.global.halo_widths();
            if let Some(a) = (0..D).find(|&a| need[a] > halo[a]) {
                return Err(LaunchError::Decomposition(format!(
                    "stencil `{}` reads field `{}` {} points away along axis {a}, but its halo is {} wide there: \
                     allocate it with a halo of at least {} along axis {a}",
                    S::INFO.name,
                    info.name,
                    need[a],
                    halo[a],
                    need[a]
                )));
            }
            let current = head.depth();
            if (0..D).all(|a| need[a] <= current[a]) {
                continue;
            }
            match stale.iter_mut().find(|(h, _, _)| std::ptr::eq(*h, head)) {
                Some((_, depth, _)) => *depth = std::array::from_fn(|a| depth[a].max(need[a])),
                None => {
                    let depth = std::array::from_fn(|a| need[a].max(current[a].min(halo[a])));
                    stale.push((head, depth, format!("`{}` of stencil `{}`", info.name, S::INFO.name)));
                }
            }
        }
        let ranges: Vec<Option<Loop<D>>> = domains.subdomains().map(|s| cut(range, &global, &s, d.grid())).collect();
        let execs = domains.execs();
        if stale.is_empty() || state.overlap == Overlap::None {
            if !stale.is_empty() {
                self.exchange(&mut state, &stale, [false; D])?;
            }
            for (i, (exec, r)) in execs.iter().zip(&ranges).enumerate() {
                if let Some(r) = r {
                    exec.run_with(r, stencil, strategy, S::map_args(&mut args, &Part(i)))?;
                }
            }
        } else {
            // Inner regions during the exchange, then the slabs next to the exchanged sides.
            let reach: [usize; D] = std::array::from_fn(|a| stale.iter().map(|(_, d, _)| d[a]).max().unwrap_or(0));
            let empty = Loop::within(global.extent(), [0; D], [0; D]);
            let whole: Vec<Loop<D>> = ranges.iter().map(|r| r.unwrap_or(empty)).collect();
            let binder = CompCommBinder::new(domains, whole, reach, Overlap::OneDivided)?
                .contiguous_axis(global.contiguous_axis());
            binder.step(
                domains,
                &mut args,
                |_, _| self.exchange(&mut state, &stale, [false; D]),
                |exec, i, r, args| match r.points() {
                    0 => Ok(()),
                    _ => exec.run_with(r, stencil, strategy, S::map_args(args, &Part(i))),
                },
            )?;
        }
        S::map_args(&mut args, &MarkWritten);
        if !reductions.is_empty() {
            let world = domains.world();
            let erased = S::erase_args(S::map_args(&mut args, &Same));
            let mut prev = reductions.into_iter();
            for a in erased {
                if let ArgValue::Reduction(r) = a {
                    combine_over_ranks(world, prev.next().expect("one value per reduction"), r);
                }
            }
        }
        Ok(())
    }

    /// Exchanges the halos of the fields (where not current to their full width), then fills the
    /// sides of each part on the physical boundary: the halos the same call gives on one
    /// device. `Periodic` is what the exchange does along an axis the decomposition makes periodic,
    /// and is refused along a split axis that it does not; other fills are refused along periodic axes.
    fn fill_halo_sides<T: Element, const D: usize>(
        &self,
        jobs: &mut [SideJob<'_, Self::Field<T, D>, D>],
    ) -> Result<(), LaunchError> {
        let domains = self.domains_of::<D>()?;
        let d = domains.decomposition();
        let mut state = self.lock()?;
        for (k, (f, fills)) in jobs.iter().enumerate() {
            self.check_home(f.head.home, "fill_halos", &format!("field {k} of the call"))?;
            for (a, sides) in fills.iter().enumerate() {
                for fill in sides.iter().flatten() {
                    let periodic = *fill == HaloFill::Periodic;
                    if periodic && d.grid()[a] > 1 && !d.periodic()[a] {
                        return Err(LaunchError::Decomposition(format!(
                            "fill_halos: field {k} of the call is filled Periodic along axis {a}, which is split over \
                             {} subdomains and not periodic in the decomposition: build the executor's Decomposition \
                             with axis {a} periodic",
                            d.grid()[a]
                        )));
                    }
                    if !periodic && d.periodic()[a] {
                        return Err(LaunchError::Decomposition(format!(
                            "fill_halos: field {k} of the call is filled {fill:?} along axis {a}, which the \
                             decomposition makes periodic (its halo is the other end's): fill it Periodic, or build \
                             the executor's Decomposition with axis {a} not periodic"
                        )));
                    }
                }
            }
        }
        // The fields whose cuts are stale or that wrap, grouped by the axes they wrap (one exchange
        // per group; a call of one kind of fill is one exchange).
        let mut groups: Vec<([bool; D], Vec<ToExchange<'_, D>>)> = Vec::new();
        for (k, (f, fills)) in jobs.iter().enumerate() {
            let wrap: [bool; D] =
                std::array::from_fn(|a| fills[a].contains(&Some(HaloFill::Periodic)) && d.periodic()[a]);
            let halo = f.head.global.halo_widths();
            let want: [usize; D] = std::array::from_fn(|a| if exchanged(d, a) { halo[a] } else { 0 });
            let current = f.head.depth();
            if wrap.contains(&true) || (0..D).any(|a| current[a] < want[a]) {
                let entry = (&f.head, want, format!("field {k} of fill_halos"));
                match groups.iter_mut().find(|(w, _)| *w == wrap) {
                    Some((_, list)) => list.push(entry),
                    None => groups.push((wrap, vec![entry])),
                }
            }
        }
        for (wrap, fields) in &groups {
            self.exchange(&mut state, fields, *wrap)?;
        }
        for (i, s) in domains.subdomains().enumerate() {
            let boundary: [[bool; 2]; D] = std::array::from_fn(|a| {
                [-1i8, 1].map(|side| {
                    let mut dir = [0i8; D];
                    dir[a] = side;
                    d.neighbour(&s, dir) == Neighbour::Boundary
                })
            });
            let mut part_jobs: Vec<SideJob<'_, E::Field<T, D>, D>> = jobs
                .iter_mut()
                .map(|(f, fills)| {
                    let per_side = std::array::from_fn(|a| {
                        let keep = |side: usize| fills[a][side].filter(|_| boundary[a][side]);
                        [keep(0), keep(1)]
                    });
                    (&mut f.parts[i], per_side)
                })
                .collect();
            if part_jobs.iter().any(|(_, fills)| fills.iter().flatten().any(Option::is_some)) {
                domains.exec(i).fill_halo_sides(&mut part_jobs)?;
            }
        }
        Ok(())
    }

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

    fn synchronize(&self) -> Result<(), LaunchError> {
        let _lock = self.lock()?;
        self.inner.domains.synchronize()
    }

    /// `n` clones of this executor, each call running in order (its parts' work overlaps inside a
    /// launch, with [`Distributed::with_overlap`]).
    fn fork_join<R>(&self, n: usize, work: impl FnOnce(&[Self]) -> Result<R, LaunchError>) -> Result<R, LaunchError> {
        work(&vec![self.clone(); n])
    }

    /// Records nothing: the caller runs the step each time.
    fn record(&self, _step: &mut dyn FnMut(&Self) -> Result<(), LaunchError>) -> Result<Option<()>, LaunchError> {
        Ok(None)
    }

    fn replay(&self, _recording: &()) -> Result<(), LaunchError> {
        Ok(())
    }
}

fn buffers(what: &str) -> LaunchError {
    LaunchError::Decomposition(format!(
        "`{what}` on a distributed executor: it moves halos itself (before the launches that need them, and in \
         `fill_halos`); message buffers belong to its subdomains' executors (`Distributed::domains().exec(i)`)"
    ))
}
