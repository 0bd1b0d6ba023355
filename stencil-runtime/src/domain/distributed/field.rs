//! [`DistField`]: a field of the global grid on a [`Distributed`](super::Distributed) executor,
//! and the maps that take a launch's distributed fields to their parts.

use super::Distributed;
use crate::executor::{Executor, FieldMap, FieldStorage, PartsHeld};
use crate::field::{Element, HaloFill, Shape};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Per axis, the fill of the low and the high side (`None`: leave it).
pub(super) type Sides<const D: usize> = [[Option<HaloFill>; 2]; D];

/// What a distributed field tells the executor without its type: where its parts are, how
/// current their halos are and which fills are pending. First in [`DistField`] (`repr(C)`), so
/// that its address is the field's [`FieldStorage::address`].
pub(super) struct Head<const D: usize> {
    pub(super) home: usize,
    pub(super) global: Shape<D>,
    pub(super) element: &'static str,
    pub(super) elem_bytes: usize,
    /// Per part: shape, storage address and home.
    pub(super) parts: Vec<(Shape<D>, u64, usize)>,
    /// Per axis, how many halo layers hold the neighbours' current values across the cuts
    /// between subdomains.
    current: [AtomicUsize; D],
    /// The fills `fill_halos` asked for and not done yet: done before the next launch that reads
    /// the field at an offset or writes it.
    pending: Mutex<Option<Sides<D>>>,
    /// The launch that wrote the field last: its stencil and the place of the field among the
    /// fields it writes (what two-divided overlap learns from).
    writer: Mutex<Option<Writer>>,
    /// The boundary the field declared: asked for again after every write.
    declared: Mutex<Option<[Option<HaloFill>; D]>>,
    /// Whether its halo on the grid's edge is as the model last left it: false after a write of a
    /// field that declares no boundary and was filled before (by `fill_halos`), true again when
    /// fills asked for are done.
    edge: AtomicBool,
    /// Whether fills were ever asked for it.
    filled: AtomicBool,
}

/// A written field of a stencil: the stencil (the address of its IR text) and the field's place
/// among the fields it writes.
pub(super) type Writer = (usize, usize);

/// What a field's halo tracking holds: how current its halos are, the fills pending and the
/// launch that wrote it last.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Tracking<const D: usize> {
    depth: [usize; D],
    pending: Option<Sides<D>>,
    writer: Option<Writer>,
    edge: bool,
}

impl<const D: usize> Head<D> {
    pub(super) fn tracking(&self) -> Tracking<D> {
        Tracking { depth: self.depth(), pending: self.pending(), writer: self.writer(), edge: self.edge() }
    }

    pub(super) fn restore(&self, t: &Tracking<D>) {
        for (c, d) in self.current.iter().zip(t.depth) {
            c.store(d, Ordering::Relaxed);
        }
        self.set_pending(t.pending);
        *self.writer.lock().unwrap_or_else(|p| p.into_inner()) = t.writer;
        self.set_edge(t.edge);
    }

    /// Whether the halo on the grid's edge is as given or filled (see the field).
    pub(super) fn edge(&self) -> bool {
        self.edge.load(Ordering::Relaxed)
    }

    pub(super) fn set_edge(&self, filled: bool) {
        self.edge.store(filled, Ordering::Relaxed);
    }

    pub(super) fn depth(&self) -> [usize; D] {
        std::array::from_fn(|a| self.current[a].load(Ordering::Relaxed))
    }

    pub(super) fn make_current(&self, depth: [usize; D]) {
        for (c, d) in self.current.iter().zip(depth) {
            c.fetch_max(d, Ordering::Relaxed);
        }
    }

    pub(super) fn make_stale(&self) {
        self.current.iter().for_each(|c| c.store(0, Ordering::Relaxed));
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Option<Sides<D>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn pending(&self) -> Option<Sides<D>> {
        *self.lock_pending()
    }

    /// Adds fills to the pending ones (a side asked again takes the later fill).
    pub(super) fn ask(&self, fills: Sides<D>) {
        self.filled.store(true, Ordering::Relaxed);
        let mut p = self.lock_pending();
        let mut sides = p.unwrap_or([[None; 2]; D]);
        for (now, new) in sides.iter_mut().flatten().zip(fills.iter().flatten()) {
            *now = new.or(*now);
        }
        *p = Some(sides);
    }

    pub(super) fn declared(&self) -> Option<[Option<HaloFill>; D]> {
        *self.declared.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn declare(&self, fills: [Option<HaloFill>; D]) {
        *self.declared.lock().unwrap_or_else(|p| p.into_inner()) = Some(fills);
        self.ask_declared();
    }

    /// Asks for the declared boundary's fills (after a write).
    pub(super) fn ask_declared(&self) {
        if let Some(fills) = self.declared().filter(|f| f.iter().any(Option::is_some)) {
            self.ask(fills.map(|f| [f; 2]));
        }
    }

    /// Whether a write asks again for every pending fill: the declared boundary fills each axis
    /// that has a pending side (so the fills done before the write would be overwritten).
    pub(super) fn pending_asked_again(&self) -> bool {
        match (self.pending(), self.declared()) {
            (Some(p), Some(d)) => {
                p.iter().zip(d).all(|(sides, fill)| fill.is_some() || sides.iter().all(Option::is_none))
            }
            _ => false,
        }
    }

    pub(super) fn set_pending(&self, sides: Option<Sides<D>>) {
        *self.lock_pending() = sides;
    }

    /// The pending fills, which the caller does now.
    pub(super) fn take_pending(&self) -> Option<Sides<D>> {
        let sides = self.lock_pending().take();
        if sides.is_some() {
            self.set_edge(true);
        }
        sides
    }

    pub(super) fn writer(&self) -> Option<Writer> {
        *self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_writer(&self, w: Writer) {
        *self.writer.lock().unwrap_or_else(|p| p.into_inner()) = Some(w);
    }
}

/// A field of the global grid on a [`Distributed`] executor: one part per local subdomain (each of
/// [`Subdomain::shape`](crate::Subdomain::shape) of the global shape), how current its halos are
/// and the halo fills still to do.
#[repr(C)]
pub struct DistField<F, const D: usize> {
    head: Head<D>,
    /// Touched only through `&mut self`, or under the executor's lock (which every call of the
    /// executor holds while it works on the parts), so an exchange may fill the halos of a field
    /// that a launch takes by shared reference.
    parts: UnsafeCell<Vec<F>>,
}

// SAFETY: the parts are reached through a shared `DistField` only under the lock of the executor
// that owns the field (its home is checked first), one call at a time; see `parts_locked`.
unsafe impl<F: Send + Sync, const D: usize> Sync for DistField<F, D> {}

impl<F, const D: usize> DistField<F, D> {
    pub(super) fn new<T: Element>(home: usize, global: Shape<D>, parts: Vec<F>, current: [usize; D]) -> Self
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
            pending: Mutex::new(None),
            writer: Mutex::new(None),
            declared: Mutex::new(None),
            edge: AtomicBool::new(true),
            filled: AtomicBool::new(false),
        };
        DistField { head, parts: UnsafeCell::new(parts) }
    }

    pub(super) fn head(&self) -> &Head<D> {
        &self.head
    }

    /// The parts, from a shared field.
    ///
    /// # Safety
    /// The caller holds the lock of the executor the field belongs to, and no reference to the
    /// parts taken under another call is still alive (the executor hands none out).
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn parts_locked(&self) -> &mut Vec<F> {
        // SAFETY: the caller's contract: no other reference to the parts is alive.
        unsafe { &mut *self.parts.get() }
    }

    /// The parts, from a shared field, to read.
    ///
    /// # Safety
    /// The caller holds the lock of the executor the field belongs to (no call changes the parts
    /// while it is held elsewhere).
    pub(super) unsafe fn parts_shared(&self) -> &Vec<F> {
        // SAFETY: the caller's contract: nothing changes the parts meanwhile.
        unsafe { &*self.parts.get() }
    }

    /// The parts, from an exclusive field.
    pub(super) fn parts_exclusive(&mut self) -> &mut Vec<F> {
        self.parts.get_mut()
    }

    /// The parts, one per local subdomain in order, to change by hand: their halos count as stale
    /// afterwards (fills asked for and not done yet are still done, and a declared boundary is
    /// filled again, as after a launch that writes the field).
    pub fn parts_mut(&mut self) -> &mut [F] {
        self.head.make_stale();
        self.head.ask_declared();
        self.parts.get_mut()
    }
}

impl<F, const D: usize> std::fmt::Debug for DistField<F, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DistField({} of {}, {} local parts, halo current {:?} deep)",
            self.head.element,
            self.head.global.describe(),
            self.head.parts.len(),
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
    fn boundary(&self) -> Option<[Option<HaloFill>; D]> {
        self.head.declared()
    }
}

/// Part `i` of each distributed field. Used under the executor's lock only.
pub(super) struct Part(pub(super) usize);

impl<E: Executor, const G: usize> FieldMap<Distributed<E, G>, E> for Part {
    fn field<'a, T: Element, const D: usize>(&self, f: &'a DistField<E::Field<T, D>, D>) -> &'a E::Field<T, D> {
        // SAFETY: the executor calls this under its lock, and the part references of one launch
        // are dropped before anything takes the parts mutably.
        unsafe { &f.parts_shared()[self.0] }
    }
    fn field_mut<'a, T: Element, const D: usize>(
        &self,
        f: &'a mut DistField<E::Field<T, D>, D>,
    ) -> &'a mut E::Field<T, D> {
        let parts: *mut Vec<E::Field<T, D>> = f.parts.get();
        // SAFETY: `f` is exclusive, and part `self.0` is reached without a reference to the
        // others: the arguments of several parts may be taken at once (`split_args`), each part's
        // used by its own host thread.
        unsafe { &mut *(*parts).as_mut_ptr().add(self.0) }
    }
    fn held<'a, T: Element>(&self, held: &'a PartsHeld<E::HeldScalar<T>>) -> &'a E::HeldScalar<T> {
        held.part(self.0)
    }
}

/// Every written field marked stale (its writer recorded), except across the cuts as deep as
/// `early` says for the written fields whose halos the launch exchanged itself (two-divided).
pub(super) struct MarkWritten<'a> {
    /// The stencil (the address of its IR text).
    pub(super) stencil: usize,
    /// Per written field (in order), the depth exchanged by the launch, if it was.
    pub(super) early: &'a [Option<Vec<usize>>],
    pub(super) next: std::cell::Cell<usize>,
}

impl<E: Executor, const G: usize> FieldMap<Distributed<E, G>, Distributed<E, G>> for MarkWritten<'_> {
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
        let k = self.next.replace(self.next.get() + 1);
        f.head.make_stale();
        if let Some(Some(depth)) = self.early.get(k) {
            f.head.make_current(std::array::from_fn(|a| depth[a]));
        }
        f.head.set_writer((self.stencil, k));
        if f.head.declared().is_none() && f.head.filled.load(Ordering::Relaxed) {
            f.head.set_edge(false);
        }
        f.head.ask_declared();
        f
    }
    fn held<'a, T: Element>(
        &self,
        held: &'a <Distributed<E, G> as Executor>::HeldScalar<T>,
    ) -> &'a <Distributed<E, G> as Executor>::HeldScalar<T> {
        held
    }
}

/// The heads of the written fields, in order.
pub(super) struct CollectWritten<const D: usize>(pub(super) std::cell::RefCell<Vec<*const Head<D>>>);

impl<E: Executor, const G: usize, const H: usize> FieldMap<Distributed<E, G>, Distributed<E, G>> for CollectWritten<H> {
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
        // A `Stencil<H>`'s fields are `H`-dimensional (the macro makes them so); checked here, so
        // that the address kept is of a `Head<H>` and never of another type.
        assert_eq!(D, H, "a {D}-dimensional field in a {H}-dimensional launch");
        self.0.borrow_mut().push(&f.head as *const Head<D> as *const Head<H>);
        f
    }
    fn held<'a, T: Element>(
        &self,
        held: &'a <Distributed<E, G> as Executor>::HeldScalar<T>,
    ) -> &'a <Distributed<E, G> as Executor>::HeldScalar<T> {
        held
    }
}
