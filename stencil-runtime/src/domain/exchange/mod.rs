//! [`HaloExchange`]: ASUCA's `BoundaryExchange`. Built once for a set of fields (any element
//! types, each with its own depth per axis, [`HaloExchange::append`]), it owns one contiguous
//! message buffer per neighbour and side, each field at its own offset, and moves halos axis by
//! axis:
//!
//! - along axis `a`, every subdomain packs, for each side with a neighbour, the `depth[a]`
//!   interior layers facing it (over the interior of the later axes, and the interior plus the
//!   depth of the earlier axes) of every field into that side's send buffer: one kernel per
//!   buffer on a GPU, row copies on the host;
//! - within the process, where the executors reach each other's memory (the host; GPUs of one
//!   device or with peer access), the halo is instead copied from the neighbour's field into the
//!   halo directly, by the receiver (one kernel per side on a GPU, reading over NVLink), with
//!   no buffer, pack or unpack (`STENCIL_DIRECT_HALOS=0` turns this off);
//! - the buffer travels to the neighbour's receive buffer of the opposite side: a buffer copy in
//!   one process (a peer copy between GPUs, ordered by events after the kernels that wrote the
//!   field and before the ones that follow); between ranks, MPI (host-staged: the device buffer
//!   through its pinned mirror) or NCCL (device to device on the executors' streams; see
//!   [`Transport`](super::Transport));
//! - the receive buffers are unpacked into the halos.
//!
//! Halos of earlier axes are complete when a later axis goes, and travel with it, so edges and
//! corners arrive (27-point and diagonal stencils read correct values). Sides on the physical
//! boundary are left alone: [`Domains::fill_boundary`] fills them, after the exchange.
//!
//! Where every halo of the exchange is copied field to field, all axes go in one round instead:
//! every subdomain waits once for the neighbours it reads (the diagonal ones too) and copies
//! each face, edge and corner from the neighbour that owns it (on a GPU: the copy engine for a
//! neighbour's one box of long rows, one kernel for every other box). The halos are the same as
//! axis by axis (`STENCIL_ONE_ROUND_HALOS=0` goes axis by axis). Where some sides are on other
//! ranks, the same round holds for messages (through MPI; over NCCL with
//! `STENCIL_ONE_ROUND_HALOS=all`): each part packs every box its neighbours on other ranks take
//! into one buffer, the messages go at once, and one unpack fills its halo (`round_messages`).

mod round_messages;

use super::domains::Domains;
use super::workers::Disjoint;
use crate::comm::buffer::{direct_halos, one_round_halos, DirectHalos, OneRound};
use crate::comm::transport::{DeviceMessage, DeviceTransport};
use crate::comm::world::Message;
use crate::domain::{DistributionError, HaloWidths, Neighbour};
use crate::error::LaunchError;
use crate::executor::{BoxPart, ErasedField, Executor, FieldStorage, MessageBuffer};
use crate::field::Element;

/// Milliseconds an exchange spent in each phase, summed over the axes
/// ([`HaloExchange::exchange_timed`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseTimes {
    /// Packing the halos' boxes into the send buffers.
    pub pack: f64,
    /// Moving the buffers: copies in the process, messages between ranks (host staging included).
    pub transfer: f64,
    /// Unpacking the receive buffers into the halos.
    pub unpack: f64,
}

/// One field of an exchange.
#[derive(Clone, Debug)]
struct Slot<const D: usize> {
    name: String,
    element: &'static str,
    elem_bytes: usize,
    depth: [usize; D],
    /// Layers of the halo beyond the grid's edge that travel with each box along the other axes
    /// (what a launch may have written there, or a fill: the neighbour's corner needs it).
    edge: [usize; D],
}

/// Where a side's messages come from and go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Peer {
    /// A subdomain of this process (its local index).
    Local(usize),
    /// A subdomain of another rank.
    Remote { rank: usize, subdomain: usize },
}

/// One side of one local subdomain along one axis, with a neighbour.
#[derive(Clone, Debug)]
struct Link<const D: usize> {
    local: usize,
    axis: usize,
    /// 0: the low side, 1: the high side.
    side: usize,
    peer: Peer,
    /// Per slot: the byte offset of its box in the message, `None` when it has no depth here.
    offsets: Vec<Option<usize>>,
    bytes: usize,
    /// Per axis, whether the subdomain's low and high sides are the grid's edge (no neighbour
    /// this exchange moves halos with): its boxes carry the halo there.
    edges: [[bool; 2]; D],
    /// Whether the halo is copied from the neighbour's field directly (a neighbour in this
    /// process whose memory the executor reaches), without the message buffers.
    direct: bool,
}

/// One subdomain that a local subdomain copies halos from in a one-round exchange: `source`
/// (a local index), the neighbour in direction `dir` (faces, edges and corners; each component
/// -1, 0 or 1, along axes without a neighbour on that side 0).
#[derive(Clone, Copy, Debug)]
struct RoundCopy<const D: usize> {
    source: usize,
    dir: [i8; D],
}

/// The buffers of a built exchange.
struct Plan<B, const D: usize> {
    links: Vec<Link<D>>,
    sends: Vec<B>,
    recvs: Vec<B>,
    /// Per local subdomain, where its halos come from when every halo is copied field to field
    /// in one round (`None`: axis by axis).
    round: Option<Vec<Vec<RoundCopy<D>>>>,
    /// Per local subdomain and axis, whether its low and high sides are the grid's edge here.
    edges: Vec<[[bool; 2]; D]>,
    /// Where some side is on another rank: every halo in one round, with messages (`None`: axis
    /// by axis, or `round`).
    messages: Option<round_messages::MessageRound<B, D>>,
}

/// A set of fields whose halos are exchanged together between the subdomains of [`Domains`]
/// (see the module docs). Every rank builds the same set, in the same order, and calls
/// [`HaloExchange::exchange`] at the same points.
///
/// ```
/// use stencil_runtime::prelude::*;
/// use stencil_runtime::{Decomposition, Domains, ErasedField, HaloExchange, HaloWidths};
///
/// // 16 x 8 x 8 points, two subdomains along x, periodic along x.
/// let d = Decomposition::new([16, 8, 8], [2, 1, 1], [true, false, false], [1, 1, 1])?;
/// let domains = Domains::new(d, vec![Host; 2])?;
/// let like = Shape3::new([16, 8, 8]).halo(1);
/// let mut u = domains.scatter(&Field3::<f32>::from_fn(like, |[i, _, _]| i as f32))?;
/// let mut rho = domains.scatter(&Field3::<f64>::from_fn(like, |[i, _, _]| -i as f64))?;
///
/// // Built once: an f32 field one layer deep, an f64 field one layer deep along x only.
/// let mut ex = HaloExchange::new(&domains);
/// ex.append::<f32>("u", HaloWidths([1, 1, 1])).append::<f64>("rho", HaloWidths([1, 0, 0]));
/// let mut fields: Vec<Vec<ErasedField<'_, 3>>> =
///     u.iter_mut().zip(&mut rho).map(|(u, r)| vec![ErasedField::of(u), ErasedField::of(r)]).collect();
/// ex.exchange(&mut fields)?;
/// drop(fields);
///
/// // Subdomain 0's low x halo holds the last interior layer of subdomain 1 (x = 15), and its
/// // high x halo the first of subdomain 1 (x = 8), in both fields.
/// assert_eq!((u[0].get([-1, 3, 3]), u[0].get([8, 3, 3])), (Some(15.0), Some(8.0)));
/// assert_eq!(rho[0].get([-1, 0, 0]), Some(-15.0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct HaloExchange<E: Executor, const D: usize> {
    domains: Domains<E, D>,
    slots: Vec<Slot<D>>,
    /// Per axis, whether the halos across the periodic wrap (the grid's edge) are exchanged too.
    wrap: [bool; D],
    /// Whether every halo goes through the message buffers, also within the process.
    buffers_only: bool,
    /// Whether halos copied field to field go axis by axis, not in one round.
    by_axes: bool,
    plan: Option<Plan<E::Buffer, D>>,
}

impl<E: Executor, const D: usize> HaloExchange<E, D> {
    /// An exchange of no field yet over `domains`.
    pub fn new(domains: &Domains<E, D>) -> Self {
        HaloExchange {
            domains: domains.clone(),
            slots: Vec::new(),
            wrap: [true; D],
            buffers_only: false,
            by_axes: false,
            plan: None,
        }
    }

    /// This exchange moving every halo through the message buffers (`true`), also between
    /// subdomains of this process that could copy field to field (as `STENCIL_DIRECT_HALOS=0`
    /// does for every exchange). For tests and benchmarks.
    #[doc(hidden)]
    pub fn through_buffers(&mut self, yes: bool) -> &mut Self {
        self.buffers_only = yes;
        self.plan = None;
        self
    }

    /// This exchange moving halos copied field to field axis by axis (`true`) rather than in one
    /// round, as `STENCIL_ONE_ROUND_HALOS=0` does for every exchange. For tests and benchmarks.
    #[doc(hidden)]
    pub fn by_axes(&mut self, yes: bool) -> &mut Self {
        self.by_axes = yes;
        self.plan = None;
        self
    }

    /// Adds a field of element type `T` named `name` (for errors), exchanged `depth` layers
    /// deep per axis (e.g. [`HaloWidths::of`] the stencils that read it; at most the fields'
    /// halo). Fields are passed to [`HaloExchange::exchange`] in the order they were appended.
    pub fn append<T: Element>(&mut self, name: &str, depth: HaloWidths<D>) -> &mut Self {
        self.slots.push(Slot {
            name: name.to_string(),
            element: T::NAME,
            elem_bytes: std::mem::size_of::<T>(),
            depth: depth.0,
            edge: depth.0,
        });
        self.plan = None;
        self
    }

    /// This exchange leaving the halos across the periodic wrap alone on the axes where `wrap` is
    /// false (only the cuts between subdomains move there).
    pub(crate) fn set_wrap(&mut self, wrap: [bool; D]) {
        self.wrap = wrap;
        self.plan = None;
    }

    /// [`HaloExchange::append`] for a field known by its element type's name and size, whose
    /// boxes carry `edge` layers of the halo beyond the grid's edge (at most the field's halo).
    pub(crate) fn append_erased(
        &mut self,
        name: String,
        element: &'static str,
        elem_bytes: usize,
        depth: [usize; D],
        edge: [usize; D],
    ) {
        self.slots.push(Slot { name, element, elem_bytes, depth, edge });
        self.plan = None;
    }

    /// The domains.
    pub fn domains(&self) -> &Domains<E, D> {
        &self.domains
    }

    /// Bytes of the messages this process sends per exchange (for bandwidth figures).
    pub fn bytes_sent(&mut self) -> Result<usize, LaunchError> {
        self.build()?;
        Ok(self.plan.as_ref().map_or(0, |p| match &p.messages {
            Some(round) => round.bytes(),
            None => p.links.iter().map(|l| l.bytes).sum(),
        }))
    }

    /// Fills the halos of the fields: `fields[i]` holds, for the `i`-th subdomain of this
    /// process ([`Domains::subdomains`]), its fields in the order they were appended, each of
    /// its subdomain's shape and with a halo at least the depth asked for.
    pub fn exchange(&mut self, fields: &mut [Vec<ErasedField<'_, D>>]) -> Result<(), LaunchError> {
        self.exchange_with(fields, None)
    }

    /// [`HaloExchange::exchange`], timing its phases: every local executor is synchronised
    /// before it and after each phase of each axis (pack; transfer, staging included; unpack), so
    /// the phases do not overlap and the synchronisations add time of their own. For benchmarks.
    pub fn exchange_timed(&mut self, fields: &mut [Vec<ErasedField<'_, D>>]) -> Result<PhaseTimes, LaunchError> {
        let mut times = PhaseTimes::default();
        self.domains.synchronize()?;
        self.exchange_with(fields, Some(&mut times))?;
        Ok(times)
    }

    fn exchange_with(
        &mut self,
        fields: &mut [Vec<ErasedField<'_, D>>],
        mut times: Option<&mut PhaseTimes>,
    ) -> Result<(), LaunchError> {
        self.check(fields)?;
        self.build()?;
        let _span = tracing::debug_span!(target: "stencil::exchange", "exchange", fields = self.slots.len(), subdomains = fields.len(), bytes_sent = self.plan.as_ref().map_or(0, |p| p.links.iter().map(|l| l.bytes).sum::<usize>())).entered();
        let plan = self.plan.as_mut().expect("built above");
        let domains = &self.domains;
        let mut last = std::time::Instant::now();
        // Adds the time since the last mark to a phase (after waiting for the executors).
        let mut mark = |phase: fn(&mut PhaseTimes) -> &mut f64| -> Result<(), LaunchError> {
            if let Some(t) = times.as_deref_mut() {
                domains.synchronize()?;
                let now = std::time::Instant::now();
                *phase(t) += (now - last).as_secs_f64() * 1e3;
                last = now;
            }
            Ok(())
        };
        if let Some(round) = &plan.round {
            let sources: Vec<Vec<usize>> =
                round.iter().map(|copies| copies.iter().map(|c| c.source).collect()).collect();
            let (slots, edges) = (&self.slots, &plan.edges);
            let fields: &[Vec<ErasedField<'_, D>>] = fields;
            copy_round(domains, &sources, &|p| {
                let mut boxes = Vec::with_capacity(round[p].len());
                for c in &round[p] {
                    let (into, from) = round_boxes(slots, c.dir, &edges[p], &fields[p], &fields[c.source])?;
                    boxes.push((domains.exec(c.source), into, from));
                }
                let sources: Vec<_> = boxes.iter().map(|(e, into, from)| (*e, &into[..], &from[..])).collect();
                domains.exec(p).copy_boxes_from(&sources)
            })?;
            return mark(|t| &mut t.transfer);
        }
        if let Some(round) = &mut plan.messages {
            return round_messages::exchange_round(&self.slots, round, &plan.edges, fields, domains, &mut mark);
        }
        for axis in 0..D {
            let links: Vec<usize> = (0..plan.links.len()).filter(|&l| plan.links[l].axis == axis).collect();
            if links.is_empty() {
                continue;
            }
            // Pack every side with a neighbour, then stage the messages for other ranks: each
            // subdomain's links on its own host thread, if it has one.
            let fields: &[Vec<ErasedField<'_, D>>] = fields;
            let by_part: Vec<Vec<usize>> = (0..domains.execs().len())
                .map(|p| links.iter().copied().filter(|&l| plan.links[l].local == p).collect())
                .collect();
            {
                let sends = Disjoint::new(&mut plan.sends);
                let plan_links = &plan.links;
                domains.each_part(&|p| {
                    for &l in by_part[p].iter().filter(|&&l| !plan_links[l].direct) {
                        let link = &plan_links[l];
                        let parts = boxes(&self.slots, link, &fields[p], true)?;
                        // SAFETY: link `l` is subdomain `p`'s: only this job touches its buffer.
                        domains.exec(p).pack(&parts, unsafe { sends.get(l) })?;
                    }
                    Ok(())
                })?;
            }
            mark(|t| &mut t.pack)?;
            direct_copies(&self.slots, plan, &links, fields, domains)?;
            let staged = domains.device_transport().is_none();
            {
                let sends = Disjoint::new(&mut plan.sends);
                let plan_links = &plan.links;
                domains.each_part(&|p| {
                    for &l in
                        by_part[p].iter().filter(|&&l| staged && matches!(plan_links[l].peer, Peer::Remote { .. }))
                    {
                        // SAFETY: as above.
                        domains.exec(p).buffer_to_host(unsafe { sends.get(l) }, plan_links[l].bytes)?;
                    }
                    Ok(())
                })?;
            }
            // Messages within the process: the neighbour's send buffer of the opposite side.
            {
                let recvs = Disjoint::new(&mut plan.recvs);
                let (plan_links, sends) = (&plan.links, &plan.sends);
                domains.each_part(&|p| {
                    for &l in by_part[p].iter().filter(|&&l| !plan_links[l].direct) {
                        let link = &plan_links[l];
                        if let Peer::Local(j) = link.peer {
                            let from = find(plan_links, j, axis, 1 - link.side)?;
                            // SAFETY: as above, for the receive buffer of link `l`.
                            let into = unsafe { recvs.get(l) };
                            domains.exec(p).copy_buffer(into, domains.exec(j), &sends[from], link.bytes)?;
                        }
                    }
                    Ok(())
                })?;
            }
            // Messages between ranks.
            let (mut sends, mut recvs) = (Vec::new(), Vec::new());
            let me = |link: &Link<D>| domains.local_range().start + link.local;
            let remote: Vec<usize> =
                links.iter().copied().filter(|&l| matches!(plan.links[l].peer, Peer::Remote { .. })).collect();
            if let Some(transport) = domains.device_transport() {
                device_messages(transport, plan, &remote, me, axis)?;
                mark(|t| &mut t.transfer)?;
                unpack(&self.slots, plan, &links, fields, domains)?;
                mark(|t| &mut t.unpack)?;
                continue;
            }
            let mut send_bytes: Vec<Option<&mut [u8]>> = plan.sends.iter_mut().map(|_| None).collect();
            let mut recv_bytes: Vec<Option<&mut [u8]>> = plan.recvs.iter_mut().map(|_| None).collect();
            for (l, (s, r)) in plan.sends.iter_mut().zip(plan.recvs.iter_mut()).enumerate() {
                if remote.contains(&l) {
                    send_bytes[l] = Some(s.host_bytes()?);
                    recv_bytes[l] = Some(r.host_bytes()?);
                }
            }
            for &l in &remote {
                let link = &plan.links[l];
                let Peer::Remote { rank, subdomain } = link.peer else { unreachable!() };
                let what = |sub: usize, side: usize| format!("{} of subdomain {sub}", face_halo(axis, side));
                let out = send_bytes[l].take().expect("staged above");
                sends.push(Message {
                    peer: rank,
                    tag: tag::<D>(subdomain, axis, 1 - link.side)?,
                    bytes: &out[..link.bytes],
                    what: what(subdomain, 1 - link.side),
                });
                let into = recv_bytes[l].take().expect("staged above");
                recvs.push(Message {
                    peer: rank,
                    tag: tag::<D>(me(link), axis, link.side)?,
                    bytes: &mut into[..link.bytes],
                    what: what(me(link), link.side),
                });
            }
            domains.world().messages(sends, recvs)?;
            {
                let recvs = Disjoint::new(&mut plan.recvs);
                let plan_links = &plan.links;
                domains.each_part(&|p| {
                    for &l in remote.iter().filter(|&&l| plan_links[l].local == p) {
                        // SAFETY: link `l` is subdomain `p`'s: only this job touches its buffer.
                        domains.exec(p).buffer_from_host(unsafe { recvs.get(l) }, plan_links[l].bytes)?;
                    }
                    Ok(())
                })?;
            }
            mark(|t| &mut t.transfer)?;
            unpack(&self.slots, plan, &links, fields, domains)?;
            mark(|t| &mut t.unpack)?;
        }
        Ok(())
    }

    /// Checks the fields against the slots and the subdomains.
    fn check(&self, fields: &[Vec<ErasedField<'_, D>>]) -> Result<(), LaunchError> {
        let d = &self.domains;
        let err = |e: DistributionError| Err(LaunchError::Decomposition(e));
        if fields.len() != d.execs().len() {
            return err(DistributionError::FieldLists {
                rank: d.world().rank(),
                given: fields.len(),
                local: d.execs().len(),
            });
        }
        for (s, list) in d.subdomains().zip(fields) {
            if list.len() != self.slots.len() {
                return err(DistributionError::FieldList {
                    given: list.len(),
                    subdomain: s.index,
                    expected: self.slots.iter().map(|s| s.name.clone()).collect(),
                });
            }
            for (slot, f) in self.slots.iter().zip(list) {
                let shape = f.shape();
                if f.element() != slot.element {
                    return err(DistributionError::FieldElement {
                        field: slot.name.clone(),
                        subdomain: s.index,
                        element: f.element(),
                        appended: slot.element,
                    });
                }
                if shape.interior() != s.extent {
                    return err(DistributionError::FieldExtent {
                        field: slot.name.clone(),
                        subdomain: s.index,
                        shape: shape.describe(),
                        extent: s.extent.to_vec(),
                        rank: d.world().rank(),
                    });
                }
                let halo = shape.halo_widths();
                if let Some(a) = (0..D).find(|&a| halo[a] < slot.depth[a]) {
                    return err(DistributionError::HaloDepth {
                        field: slot.name.clone(),
                        axis: a,
                        halo: halo[a],
                        depth: slot.depth[a],
                    });
                }
            }
        }
        Ok(())
    }

    /// Lays out the messages and allocates the buffers (once, until a field is appended).
    fn build(&mut self) -> Result<(), LaunchError> {
        if self.plan.is_some() {
            return Ok(());
        }
        let d = self.domains.decomposition();
        for slot in &self.slots {
            for axis in 0..D {
                let depth = slot.depth[axis];
                if depth == 0 {
                    continue;
                }
                if let Some(s) = d.subdomains().find(|s| s.extent[axis] < depth) {
                    return Err(DistributionError::ThinForExchange {
                        field: slot.name.clone(),
                        subdomain: s.index,
                        axis,
                        points: s.extent[axis],
                        depth,
                    }
                    .into());
                }
            }
        }
        let mut links = Vec::new();
        // Per local subdomain and axis, whether each side is the grid's edge for this exchange.
        let edges: Vec<[[bool; 2]; D]> = self
            .domains
            .subdomains()
            .map(|s| {
                std::array::from_fn(|b| {
                    std::array::from_fn(|side| {
                        let mut dir = [0i8; D];
                        dir[b] = if side == 0 { -1 } else { 1 };
                        let across_wrap = if side == 0 { s.coords[b] == 0 } else { s.coords[b] + 1 == d.grid()[b] };
                        !matches!(d.neighbour(&s, dir), Neighbour::Domain(_)) || (across_wrap && !self.wrap[b])
                    })
                })
            })
            .collect();
        for axis in 0..D {
            for (local, s) in self.domains.subdomains().enumerate() {
                for side in 0..2 {
                    let mut dir = [0i8; D];
                    dir[axis] = if side == 0 { -1 } else { 1 };
                    let Neighbour::Domain(j) = d.neighbour(&s, dir) else { continue };
                    let across_wrap =
                        if side == 0 { s.coords[axis] == 0 } else { s.coords[axis] + 1 == d.grid()[axis] };
                    if across_wrap && !self.wrap[axis] {
                        continue;
                    }
                    let peer = match self.domains.local_index(j) {
                        Some(i) => Peer::Local(i),
                        None => Peer::Remote { rank: self.domains.rank_of(j), subdomain: j },
                    };
                    let mut bytes = 0;
                    let offsets = self
                        .slots
                        .iter()
                        .map(|slot| {
                            let (_, len) = box_of(slot, s.extent, axis, &edges[local]);
                            (slot.depth[axis] > 0).then(|| {
                                let at = bytes;
                                bytes = (at + len.iter().product::<usize>() * slot.elem_bytes).next_multiple_of(8);
                                at
                            })
                        })
                        .collect();
                    // Both ways or neither: a direct link's neighbour packs nothing for it.
                    let direct = match peer {
                        Peer::Local(j) => {
                            let (me, them) = (self.domains.exec(local), self.domains.exec(j));
                            !self.buffers_only
                                && direct_halos()? != DirectHalos::Off
                                && me.reaches(them)?
                                && them.reaches(me)?
                        }
                        Peer::Remote { .. } => false,
                    };
                    if bytes > 0 {
                        links.push(Link { local, axis, side, peer, offsets, bytes, edges: edges[local], direct });
                    }
                }
            }
        }
        let round = self.one_round(&links, &edges)?;
        let mut messages = if round.is_none() { self.message_round(&links, &edges)? } else { None };
        // Every rank sends in one round or none does: a rank whose own parts cannot (a message
        // through buffers within its process, its settings: `STENCIL_ONE_ROUND_HALOS=0` on it
        // alone) goes axis by axis, and so must the ranks it exchanges with. Every rank asks,
        // whichever way its own halos would go.
        let world = self.domains.world();
        if world.size() > 1 && !self.by_axes {
            let remote = links.iter().any(|l| matches!(l.peer, Peer::Remote { .. }));
            let on = one_round_halos()? != OneRound::Off;
            let able = on && (round.is_some() || messages.is_some() || !remote);
            if world.max(if able { 0.0 } else { 1.0 }) > 0.0 {
                messages = None;
            }
        }
        let (mut sends, mut recvs) = (Vec::new(), Vec::new());
        for l in &links {
            // A direct link's buffers stay empty; its neighbour's opposite link is direct too. In
            // a round with messages the round's buffers carry them.
            let bytes = if l.direct || messages.is_some() { 0 } else { l.bytes };
            let exec = self.domains.exec(l.local);
            sends.push(exec.alloc_buffer(bytes)?);
            recvs.push(exec.alloc_buffer(bytes)?);
        }
        self.plan = Some(Plan { links, sends, recvs, round, edges, messages });
        Ok(())
    }

    /// Where each local subdomain copies its halos from in one round: every face, edge and
    /// corner that has a neighbour (along the axes with one on that side) and a box in some
    /// field. `None` (axis by axis) unless every link is copied field to field, every neighbour
    /// read (the diagonal ones too) is in this process and reached both ways, and
    /// `STENCIL_ONE_ROUND_HALOS` (and [`HaloExchange::by_axes`]) allows it.
    fn one_round(
        &self,
        links: &[Link<D>],
        edges: &[[[bool; 2]; D]],
    ) -> Result<Option<Vec<Vec<RoundCopy<D>>>>, LaunchError> {
        if self.by_axes || links.is_empty() || !links.iter().all(|l| l.direct) || one_round_halos()? == OneRound::Off {
            return Ok(None);
        }
        let mut round: Vec<Vec<RoundCopy<D>>> = self.domains.subdomains().map(|_| Vec::new()).collect();
        for (local, dir, neighbour) in self.round_walk(edges) {
            let Neighbour::Domain(j) = neighbour else { return Ok(None) };
            let Some(source) = self.domains.local_index(j) else { return Ok(None) };
            let (me, them) = (self.domains.exec(local), self.domains.exec(source));
            if !(me.reaches(them)? && them.reaches(me)?) {
                return Ok(None);
            }
            round[local].push(RoundCopy { source, dir });
        }
        Ok(Some(round))
    }

    /// The halos of a round, each local subdomain's in turn: every direction (face, edge,
    /// corner) not across the grid's edge in which some field has a box (every axis the
    /// direction crosses exchanged in it), with the neighbour there.
    fn round_walk<'a>(&'a self, edges: &'a [[[bool; 2]; D]]) -> impl Iterator<Item = (usize, [i8; D], Neighbour)> + 'a {
        let d = self.domains.decomposition();
        self.domains.subdomains().enumerate().flat_map(move |(local, s)| {
            directions::<D>().filter_map(move |dir| {
                let side = |b: usize| usize::from(dir[b] > 0);
                let across_edge = (0..D).any(|b| dir[b] != 0 && edges[local][b][side(b)]);
                let some_box = self.slots.iter().any(|slot| (0..D).all(|b| dir[b] == 0 || slot.depth[b] > 0));
                (!across_edge && some_box).then(|| (local, dir, d.neighbour(&s, dir)))
            })
        })
    }
}

/// Every direction of `D` axes (each component -1, 0 or 1) but none: faces, edges, corners.
fn directions<const D: usize>() -> impl Iterator<Item = [i8; D]> {
    (0..3usize.pow(D as u32)).filter_map(|code| {
        let dir: [i8; D] = std::array::from_fn(|b| (code / 3usize.pow(b as u32) % 3) as i8 - 1);
        dir.iter().any(|&c| c != 0).then_some(dir)
    })
}

/// A local subdomain's halo boxes in direction `dir` (one per field that has one) and the
/// boxes of `source`'s fields they copy (a [`RoundCopy`]): along an axis the direction crosses,
/// `depth` layers, the neighbour's last interior ones on the low side (its first on the high
/// side); along the others the interior, with `edge` layers of the halo on a side that is the
/// grid's edge (the same position in both fields). What the axes one after the other leave
/// there.
fn round_boxes<'f, const D: usize>(
    slots: &[Slot<D>],
    dir: [i8; D],
    edges: &[[bool; 2]; D],
    into: &'f [ErasedField<'_, D>],
    source: &'f [ErasedField<'_, D>],
) -> Result<(Vec<BoxPart<'f, D>>, Vec<BoxPart<'f, D>>), LaunchError> {
    let (mut to, mut from) = (Vec::new(), Vec::new());
    for ((slot, f), g) in slots.iter().zip(into).zip(source) {
        let (h, n) = (f.shape().halo_widths(), f.shape().interior());
        let (hs, ns) = (g.shape().halo_widths(), g.shape().interior());
        let (mut at, mut at_source, mut len) = ([0; D], [0; D], [0; D]);
        for b in 0..D {
            let k = slot.depth[b];
            (at[b], at_source[b], len[b]) = match dir[b] {
                0 => {
                    let [low, high] = edges[b].map(|e| if e { slot.edge[b] } else { 0 });
                    (h[b] - low, hs[b] - low, low + n[b] + high)
                }
                -1 => (h[b] - k, hs[b] + ns[b] - k, k),
                _ => (h[b] + n[b], hs[b], k),
            };
        }
        if len.contains(&0) {
            continue;
        }
        to.push(f.part(at, len, 0)?);
        from.push(g.part(at_source, len, 0)?);
    }
    Ok((to, from))
}

impl<E: Executor, const D: usize> Domains<E, D> {
    /// Fills the halo of `fields[i]` (the field of local subdomain `i`) from the neighbours'
    /// interiors, as deep as the fields' halo. Builds a [`HaloExchange`] for the call: to
    /// exchange the same fields repeatedly, or several fields at once, keep one.
    pub fn exchange<T: Element>(&self, fields: &mut [E::Field<T, D>]) -> Result<(), LaunchError> {
        let Some(first) = fields.first() else {
            return self.check_count(0, "exchange");
        };
        let halo = HaloWidths(first.shape().halo_widths());
        let mut ex = HaloExchange::new(self);
        ex.append::<T>("field", halo);
        let mut erased: Vec<Vec<ErasedField<'_, D>>> = fields.iter_mut().map(|f| vec![ErasedField::of(f)]).collect();
        ex.exchange(&mut erased)
    }
}

/// Names of the sides, for messages.
const SIDES: [&str; 2] = ["low", "high"];

/// The name of the halo on `side` (0 low, 1 high) of `axis`, as errors and messages give it.
fn face_halo(axis: usize, side: usize) -> String {
    format!("axis {axis} {} halo", SIDES[side])
}

/// Unpacks the receive buffers of `links` into the halos.
fn unpack<E: Executor, const D: usize>(
    slots: &[Slot<D>],
    plan: &Plan<E::Buffer, D>,
    links: &[usize],
    fields: &[Vec<ErasedField<'_, D>>],
    domains: &Domains<E, D>,
) -> Result<(), LaunchError> {
    domains.each_part(&|p| {
        for &l in links.iter().filter(|&&l| plan.links[l].local == p && !plan.links[l].direct) {
            let parts = boxes(slots, &plan.links[l], &fields[p], false)?;
            domains.exec(p).unpack(&plan.recvs[l], &parts)?;
        }
        Ok(())
    })
}

/// The halos of the direct links among `links` (one axis), each copied from the neighbour's field
/// by the receiving subdomain's executor ([`copy_round`]).
fn direct_copies<E: Executor, const D: usize>(
    slots: &[Slot<D>],
    plan: &Plan<E::Buffer, D>,
    links: &[usize],
    fields: &[Vec<ErasedField<'_, D>>],
    domains: &Domains<E, D>,
) -> Result<(), LaunchError> {
    let direct: Vec<usize> = links.iter().copied().filter(|&l| plan.links[l].direct).collect();
    if direct.is_empty() {
        return Ok(());
    }
    let mut sources = vec![Vec::new(); domains.execs().len()];
    for &l in &direct {
        if let Peer::Local(j) = plan.links[l].peer {
            sources[plan.links[l].local].push(j);
        }
    }
    copy_round(domains, &sources, &|p| {
        for &l in direct.iter().filter(|&&l| plan.links[l].local == p) {
            let link = &plan.links[l];
            let Peer::Local(j) = link.peer else { continue };
            let from = find(&plan.links, j, link.axis, 1 - link.side)?;
            let into = boxes(slots, link, &fields[p], false)?;
            let out_of = boxes(slots, &plan.links[from], &fields[j], true)?;
            domains.exec(p).copy_boxes(&into, domains.exec(j), &out_of)?;
        }
        Ok(())
    })
}

/// Copies halos field to field, each local subdomain `p` reading the fields of `sources[p]`
/// (`copy(p)` issues its copies on its executor): every subdomain marks its work so far, each
/// reader orders its copies after its sources' marks, and each source orders its later work
/// after the copies out of its fields. No copy waits for another copy.
fn copy_round<E: Executor, const D: usize>(
    domains: &Domains<E, D>,
    sources: &[Vec<usize>],
    copy: &(dyn Fn(usize) -> Result<(), LaunchError> + Sync),
) -> Result<(), LaunchError> {
    let parts = domains.execs().len();
    // Who reads from whom, each once: `sources[p]` the subdomains part `p` copies from,
    // `readers[j]` those that copy from `j`.
    let (mut from, mut readers) = (vec![Vec::new(); parts], vec![Vec::new(); parts]);
    for (p, list) in sources.iter().enumerate() {
        for &j in list {
            for (list, v) in [(&mut from[p], j), (&mut readers[j], p)] {
                if !list.contains(&v) {
                    list.push(v);
                }
            }
        }
    }
    let marks = |of: &[Vec<usize>]| -> Result<Vec<Option<E::Mark>>, LaunchError> {
        let out: Vec<std::sync::Mutex<Option<E::Mark>>> = (0..parts).map(|_| std::sync::Mutex::new(None)).collect();
        domains.each_part(&|p| {
            if !of[p].is_empty() {
                let m = domains.exec(p).mark()?;
                *out[p].lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(m);
            }
            Ok(())
        })?;
        Ok(out.into_iter().map(|m| m.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner)).collect())
    };
    let written = marks(&readers)?;
    domains.each_part(&|p| {
        for &j in &from[p] {
            domains.exec(p).after(written[j].as_ref().expect("marked above"))?;
        }
        if from[p].is_empty() {
            return Ok(());
        }
        copy(p)
    })?;
    let copied = marks(&from)?;
    domains.each_part(&|j| {
        for &p in &readers[j] {
            domains.exec(j).after(copied[p].as_ref().expect("marked above"))?;
        }
        Ok(())
    })
}

/// The messages of the `remote` links of one axis through a device transport, device buffer to
/// device buffer. Between two subdomains, both sides order their messages by the receiving
/// side's tag, so that a pair with two links (periodic, two subdomains along the axis) matches
/// each send with its receive.
fn device_messages<B: MessageBuffer, const D: usize>(
    transport: &dyn DeviceTransport,
    plan: &Plan<B, D>,
    remote: &[usize],
    me: impl Fn(&Link<D>) -> usize,
    axis: usize,
) -> Result<(), LaunchError> {
    let (mut sends, mut recvs) = (Vec::new(), Vec::new());
    let address = |b: &B, l: &Link<D>| {
        b.device_address().ok_or_else(|| {
            LaunchError::Decomposition(DistributionError::HostHalo { halo: face_halo(axis, l.side), subdomain: me(l) })
        })
    };
    for &l in remote {
        let link = &plan.links[l];
        let Peer::Remote { subdomain, .. } = link.peer else { continue };
        sends.push(DeviceMessage {
            local: link.local,
            address: address(&plan.sends[l], link)?,
            bytes: link.bytes,
            peer: subdomain,
            order: tag::<D>(subdomain, axis, 1 - link.side)?,
            halo: face_halo(axis, 1 - link.side),
        });
        recvs.push(DeviceMessage {
            local: link.local,
            address: address(&plan.recvs[l], link)?,
            bytes: link.bytes,
            peer: subdomain,
            order: tag::<D>(me(link), axis, link.side)?,
            halo: face_halo(axis, link.side),
        });
    }
    transport.exchange(&sends, &recvs)
}

/// The message tag of the halo on `side` of `axis` of subdomain `receiver`.
fn tag<const D: usize>(receiver: usize, axis: usize, side: usize) -> Result<i32, LaunchError> {
    let t = (receiver * D + axis) * 2 + side;
    // MPI guarantees tags up to 32767.
    i32::try_from(t).ok().filter(|&t| t <= 32767).ok_or_else(|| {
        LaunchError::Decomposition(DistributionError::TooManySubdomains { receiver, limit: 32768 / (2 * D) })
    })
}

/// The link of local subdomain `local` on `side` of `axis`.
fn find<const D: usize>(links: &[Link<D>], local: usize, axis: usize, side: usize) -> Result<usize, LaunchError> {
    links
        .iter()
        .position(|l| l.local == local && l.axis == axis && l.side == side)
        .ok_or(LaunchError::Decomposition(DistributionError::MissingNeighbour { local, side, axis }))
}

/// Where a field's box on a side of `axis` starts before the interior, and its points, along
/// each axis: along `axis`, `depth[axis]` layers (the start is set by the caller); along an
/// earlier axis the interior plus `depth` on each end (their halos are complete and carry edges
/// and corners), along a later axis the interior; and on a side that is the grid's edge, `edge`
/// layers of the halo there (what a launch wrote beyond the edge, or a fill), on any axis.
fn box_of<const D: usize>(
    slot: &Slot<D>,
    extent: [usize; D],
    axis: usize,
    edges: &[[bool; 2]; D],
) -> ([usize; D], [usize; D]) {
    let end = |b: usize, side: usize| match (edges[b][side], b.cmp(&axis)) {
        (true, _) => slot.edge[b],
        (false, std::cmp::Ordering::Less) => slot.depth[b],
        (false, _) => 0,
    };
    let before = std::array::from_fn(|b| if b == axis { 0 } else { end(b, 0) });
    let len = std::array::from_fn(|b| if b == axis { slot.depth[b] } else { end(b, 0) + extent[b] + end(b, 1) });
    (before, len)
}

/// The boxes of a link's fields: the interior layers sent (`send`) or the halo received.
fn boxes<'f, const D: usize>(
    slots: &[Slot<D>],
    link: &Link<D>,
    fields: &'f [ErasedField<'_, D>],
    send: bool,
) -> Result<Vec<crate::executor::BoxPart<'f, D>>, LaunchError> {
    let a = link.axis;
    let mut parts = Vec::new();
    for ((slot, field), offset) in slots.iter().zip(fields).zip(&link.offsets) {
        let Some(offset) = *offset else { continue };
        let (h, n) = (field.shape().halo_widths(), field.shape().interior());
        let (before, len) = box_of(slot, n, a, &link.edges);
        let at = std::array::from_fn(|b| match b == a {
            false => h[b] - before[b],
            true => match (send, link.side) {
                (true, 0) => h[a],
                (true, _) => h[a] + n[a] - slot.depth[a],
                (false, 0) => h[a] - slot.depth[a],
                (false, _) => h[a] + n[a],
            },
        });
        parts.push(field.part(at, len, offset)?);
    }
    Ok(parts)
}
