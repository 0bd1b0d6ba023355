//! How the distributed executor brings halos up to date: which fields a launch needs settled
//! ([`Settle`]), the exchanges that move them (one per set of wrapped axes, every field of the
//! launch in one message per neighbour) and the physical-boundary fills asked for by `fill_halos`,
//! done on the parts when a launch first needs them.

use super::field::{DistField, Head, Sides};
use super::{exchanged, same, Distributed, State};
use crate::domain::decomposition::Neighbour;
use crate::domain::exchange::HaloExchange;
use crate::domain::DistributionError;
use crate::error::LaunchError;
use crate::executor::{ErasedField, Executor, FieldMap, SideJob, Stencil};
use crate::field::{Element, HaloFill};
use crate::stencil::FieldInfo;
use std::cell::RefCell;

/// A field whose halo a launch needs brought up to date.
pub(super) struct Settle<'h, const D: usize> {
    pub(super) head: &'h Head<D>,
    /// Layers to exchange per axis (0 on axes that do not exchange).
    pub(super) depth: [usize; D],
    /// The axes whose periodic wrap is exchanged too (a pending `Periodic` fill).
    pub(super) wrap: [bool; D],
    /// Whether it has fills pending.
    pub(super) fill: bool,
    /// How far the stencil reads it per axis (for the overlap's inner region).
    pub(super) reach: [usize; D],
    /// The field's and the stencil's names, for messages.
    pub(super) name: (&'static str, &'static str),
}

impl<'h, const D: usize> Settle<'h, D> {
    /// What `head` (read by `info` of `stencil`) needs before a launch, if anything: the exchange
    /// of its stale layers as deep as the stencil reads across the cuts, and its pending fills
    /// (with the full halo exchanged first). `all` settles it whatever the stencil reads (a
    /// written field).
    pub(super) fn of<E: Executor, const G: usize>(
        exec: &Distributed<E, G>,
        head: &'h Head<D>,
        info: &FieldInfo,
        stencil: &'static str,
        all: bool,
    ) -> Result<Option<Self>, LaunchError> {
        let d = exec.domains_of::<D>()?.decomposition();
        let reach: [usize; D] = std::array::from_fn(|a| (-info.lo[a]).max(info.hi[a]).max(0) as usize);
        let halo = head.global.halo_widths();
        let need: [usize; D] = std::array::from_fn(|a| if exchanged(d, a) { reach[a] } else { 0 });
        if let Some(a) = (0..D).find(|&a| need[a] > halo[a]) {
            return Err(DistributionError::HaloNarrowerThanReach {
                stencil,
                field: info.name,
                axis: a,
                reach: need[a],
                halo: halo[a],
            }
            .into());
        }
        let pending = head.pending();
        if !all && reach.iter().all(|&r| r == 0) {
            return Ok(None);
        }
        let current = head.depth();
        let name = (info.name, stencil);
        let Some(sides) = pending else {
            let stale = (0..D).any(|a| need[a] > current[a]);
            let depth = std::array::from_fn(|a| need[a].max(current[a].min(halo[a])));
            return Ok(stale.then_some(Settle { head, depth, wrap: [false; D], fill: false, reach, name }));
        };
        let wrap = std::array::from_fn(|a| d.periodic()[a] && sides[a].contains(&Some(HaloFill::Periodic)));
        let depth = std::array::from_fn(|a| if exchanged(d, a) { halo[a] } else { 0 });
        Ok(Some(Settle { head, depth, wrap, fill: true, reach, name }))
    }

    pub(super) fn needs_exchange(&self) -> bool {
        let current = self.head.depth();
        self.wrap.contains(&true) || (0..D).any(|a| self.depth[a] > current[a])
    }
}

impl<E: Executor, const G: usize> Distributed<E, G> {
    /// Exchanges the halos of `fields` (each as deep as its `depth`) in one [`HaloExchange`],
    /// across the periodic wrap only on the axes `wrap` names, and records them current that
    /// deep (across the cuts between subdomains; the wrap is the grid's edge, filled only when
    /// asked, as on one domain).
    pub(super) fn exchange<const D: usize>(
        &self,
        state: &mut State<E, G>,
        fields: &[&Settle<'_, D>],
        wrap: [bool; D],
    ) -> Result<(), LaunchError> {
        // The fields' element types, depths and halos (the edge layers that travel) name the exchange.
        let mut key: Vec<(&'static str, [usize; G])> = fields
            .iter()
            .flat_map(|f| [(f.head.element, same(f.depth)), ("halo", same(f.head.global.halo_widths()))])
            .collect();
        key.push(("wrap", same(wrap.map(usize::from))));
        let domains = &self.inner.domains;
        let ex = state.built.entry(key).or_insert_with(|| {
            let mut ex = HaloExchange::new(domains);
            ex.set_wrap(same(wrap));
            for f in fields {
                let name = format!("`{}` of stencil `{}`", f.name.0, f.name.1);
                ex.append_erased(
                    name,
                    f.head.element,
                    f.head.elem_bytes,
                    same(f.depth),
                    same(f.head.global.halo_widths()),
                );
            }
            ex
        });
        let mut lists: Vec<Vec<ErasedField<'_, G>>> = (0..domains.execs().len())
            .map(|i| {
                let part = |h: &Head<D>| {
                    let (shape, address, home) = h.parts[i];
                    ErasedField::from_raw(same(shape), address, home, h.element, h.elem_bytes)
                };
                fields.iter().map(|f| part(f.head)).collect()
            })
            .collect();
        ex.exchange(&mut lists)?;
        state.exchanges += 1;
        for f in fields {
            f.head.make_current(f.depth);
        }
        Ok(())
    }

    /// Brings the halos of `list` up to date: the exchanges (one per set of wrapped axes), then
    /// the pending fills of the physical boundary on the parts (`args` reaches the fields typed).
    pub(super) fn settle<S: Stencil<D>, const D: usize>(
        &self,
        state: &mut State<E, G>,
        args: &mut S::Args<'_, Self>,
        list: &[Settle<'_, D>],
    ) -> Result<(), LaunchError> {
        let _span = tracing::debug_span!(target: "stencil::distributed", "settle", fields = list.len()).entered();
        let mut groups: Vec<([bool; D], Vec<&Settle<'_, D>>)> = Vec::new();
        for s in list.iter().filter(|s| s.needs_exchange()) {
            match groups.iter_mut().find(|(w, _)| *w == s.wrap) {
                Some((_, g)) => g.push(s),
                None => groups.push((s.wrap, vec![s])),
            }
        }
        for (wrap, fields) in &groups {
            self.exchange(state, fields, *wrap)?;
        }
        let targets: Vec<usize> = list.iter().filter(|s| s.fill).map(|s| s.head as *const Head<D> as usize).collect();
        if !targets.is_empty() {
            let fill = Fill { exec: self, targets, error: RefCell::new(None) };
            S::map_args(args, &fill);
            if let Some(e) = fill.error.into_inner() {
                return Err(e);
            }
        }
        self.settled(state)
    }

    /// Does the pending fills of one field now (for a read of its halo): the exchange of its full
    /// halo where stale or wrapped, then the physical-boundary fills on its parts.
    pub(super) fn settle_field<T: Element, const D: usize>(
        &self,
        state: &mut State<E, G>,
        field: &DistField<E::Field<T, D>, D>,
    ) -> Result<(), LaunchError> {
        let head = field.head();
        let Some(sides) = head.pending() else { return Ok(()) };
        let d = self.domains_of::<D>()?.decomposition();
        let halo = head.global.halo_widths();
        let wrap = std::array::from_fn(|a| d.periodic()[a] && sides[a].contains(&Some(HaloFill::Periodic)));
        let depth = std::array::from_fn(|a| if exchanged(d, a) { halo[a] } else { 0 });
        let s = Settle { head, depth, wrap, fill: true, reach: [0; D], name: ("the field read", "read_range") };
        if s.needs_exchange() {
            self.exchange(state, &[&s], wrap)?;
        }
        let sides = head.take_pending().unwrap_or(sides);
        // SAFETY: the caller holds the executor's lock; no part reference of a launch is alive.
        self.fill_physical(unsafe { field.parts_locked() }, sides)?;
        self.settled(state)
    }

    /// Fills the sides of each part that lie on the physical boundary as `sides` asks (the
    /// `Periodic` ones along axes the exchange wraps are done already).
    pub(super) fn fill_physical<T: Element, const D: usize>(
        &self,
        parts: &mut [E::Field<T, D>],
        sides: Sides<D>,
    ) -> Result<(), LaunchError> {
        let _span = tracing::debug_span!(target: "stencil::distributed", "fill").entered();
        let domains = self.domains_of::<D>()?;
        let d = domains.decomposition();
        for (i, (s, part)) in domains.subdomains().zip(parts).enumerate() {
            let fills: Sides<D> = std::array::from_fn(|a| {
                std::array::from_fn(|side| {
                    let mut dir = [0i8; D];
                    dir[a] = if side == 0 { -1 } else { 1 };
                    let physical = d.neighbour(&s, dir) == Neighbour::Boundary;
                    sides[a][side].filter(|_| physical)
                })
            });
            if fills.iter().flatten().any(Option::is_some) {
                let mut job: [SideJob<'_, E::Field<T, D>, D>; 1] = [(part, fills)];
                domains.exec(i).fill_halo_sides(&mut job)?;
            }
        }
        Ok(())
    }
}

/// The pending fills of the target fields, done on their parts.
struct Fill<'x, E: Executor, const G: usize> {
    exec: &'x Distributed<E, G>,
    /// Addresses of the targets' heads.
    targets: Vec<usize>,
    error: RefCell<Option<LaunchError>>,
}

impl<E: Executor, const G: usize> Fill<'_, E, G> {
    fn visit<T: Element, const D: usize>(&self, head: &Head<D>, parts: impl FnOnce() -> *mut Vec<E::Field<T, D>>) {
        if self.error.borrow().is_some() || !self.targets.contains(&(head as *const Head<D> as usize)) {
            return;
        }
        let Some(sides) = head.take_pending() else { return };
        // SAFETY: `parts` points at the field's parts, which no other reference reaches during the
        // call (the executor's lock is held and no part reference of a launch is alive).
        let parts = unsafe { &mut *parts() };
        if let Err(e) = self.exec.fill_physical(parts, sides) {
            *self.error.borrow_mut() = Some(e);
        }
    }
}

impl<E: Executor, const G: usize> FieldMap<Distributed<E, G>, Distributed<E, G>> for Fill<'_, E, G> {
    fn field<'a, T: Element, const D: usize>(
        &self,
        f: &'a DistField<E::Field<T, D>, D>,
    ) -> &'a DistField<E::Field<T, D>, D> {
        // SAFETY (of `parts_locked`): under the executor's lock, no other part reference alive.
        self.visit::<T, D>(f.head(), || unsafe { f.parts_locked() as *mut _ });
        f
    }
    fn field_mut<'a, T: Element, const D: usize>(
        &self,
        f: &'a mut DistField<E::Field<T, D>, D>,
    ) -> &'a mut DistField<E::Field<T, D>, D> {
        let parts = f.parts_exclusive() as *mut Vec<E::Field<T, D>>;
        self.visit::<T, D>(f.head(), || parts);
        f
    }
    fn held<'a, T: Element>(
        &self,
        held: &'a <Distributed<E, G> as Executor>::HeldScalar<T>,
    ) -> &'a <Distributed<E, G> as Executor>::HeldScalar<T> {
        held
    }
}
