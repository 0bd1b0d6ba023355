//! One round of halo messages between ranks (design record 0049): every face, edge and corner
//! of each subdomain travels at once, from the neighbour that owns it, instead of one axis after
//! the other. A part packs all its messages into one send buffer (one kernel per 16 boxes on a
//! GPU), the messages go in one MPI wait or one NCCL group, and one unpack fills the halos; the
//! neighbours in this process are copied field to field in the same round. The halos are those
//! the axes one after the other leave (the boxes of [`round_boxes`]).

use super::{copy_round, face_halo, round_boxes, HaloExchange, Link, Peer, PhaseTimes, Slot};
use crate::comm::buffer::{direct_halos, one_round_halos, DirectHalos, OneRound};
use crate::comm::transport::DeviceMessage;
use crate::comm::world::Message;
use crate::domain::workers::Disjoint;
use crate::domain::{DistributionError, Domains, Neighbour};
use crate::error::LaunchError;
use crate::executor::{BoxPart, ErasedField, Executor, MessageBuffer};

/// A face, edge or corner of a local subdomain in a round with messages: its halo in direction
/// `dir` comes from `peer`, which in turn takes from it the box it fills its halo in `-dir` with.
#[derive(Clone, Debug)]
pub(super) struct RoundLink<const D: usize> {
    local: usize,
    dir: [i8; D],
    /// The neighbour (its global index) and where it is: in this process (copied field to field)
    /// or on another rank (a message each way).
    neighbour: usize,
    peer: Peer,
    /// Per slot: the byte offset of its box in the message, `None` when it has none this way.
    offsets: Vec<Option<usize>>,
    bytes: usize,
    /// Where the message starts in the part's send and receive buffers (messages only).
    at: usize,
}

/// The links and buffers of an exchange in one round with messages.
pub(super) struct MessageRound<B, const D: usize> {
    links: Vec<RoundLink<D>>,
    /// Per local part: one send and one receive buffer holding every message of the part.
    sends: Vec<B>,
    recvs: Vec<B>,
    /// Per local part: the bytes of its messages.
    used: Vec<usize>,
}

impl<B, const D: usize> MessageRound<B, D> {
    /// Bytes of the halos this process receives per exchange, copies and messages.
    pub(super) fn bytes(&self) -> usize {
        self.links.iter().map(|l| l.bytes).sum()
    }
}

impl<E: Executor, const D: usize> HaloExchange<E, D> {
    /// The round with messages, where it applies: some side of the exchange is on another rank,
    /// every neighbour in this process (the diagonal ones too) is copied field to field, and
    /// `STENCIL_ONE_ROUND_HALOS` (and [`HaloExchange::by_axes`]) allows it: `1` for MPI, `all`
    /// for NCCL too. `None`: axis by axis.
    pub(super) fn message_round(
        &self,
        links: &[Link<D>],
        edges: &[[[bool; 2]; D]],
    ) -> Result<Option<MessageRound<E::Buffer, D>>, LaunchError> {
        let setting = one_round_halos()?;
        let remote = |p: &Peer| matches!(p, Peer::Remote { .. });
        if self.by_axes
            || setting == OneRound::Off
            || !links.iter().any(|l| remote(&l.peer))
            || links.iter().any(|l| !remote(&l.peer) && !l.direct)
            || (self.domains.device_transport().is_some() && setting != OneRound::All)
        {
            return Ok(None);
        }
        let extents: Vec<[usize; D]> = self.domains.subdomains().map(|s| s.extent).collect();
        let (mut round, mut used) = (Vec::new(), vec![0usize; extents.len()]);
        for (local, dir, neighbour) in self.round_walk(edges) {
            let mut bytes = 0;
            let offsets: Vec<Option<usize>> = self
                .slots
                .iter()
                .map(|slot| {
                    let len = round_len(slot, extents[local], dir, &edges[local])?;
                    let at = bytes;
                    bytes = (at + len.iter().product::<usize>() * slot.elem_bytes).next_multiple_of(8);
                    Some(at)
                })
                .collect();
            let Neighbour::Domain(j) = neighbour else { return Ok(None) };
            let peer = match self.domains.local_index(j) {
                Some(i) => {
                    let (me, them) = (self.domains.exec(local), self.domains.exec(i));
                    let direct = !self.buffers_only
                        && direct_halos()? != DirectHalos::Off
                        && me.reaches(them)?
                        && them.reaches(me)?;
                    if !direct {
                        return Ok(None);
                    }
                    Peer::Local(i)
                }
                None => Peer::Remote { rank: self.domains.rank_of(j), subdomain: j },
            };
            let at = used[local];
            if remote(&peer) {
                used[local] += bytes;
            }
            round.push(RoundLink { local, dir, neighbour: j, peer, offsets, bytes, at });
        }
        let (mut sends, mut recvs) = (Vec::new(), Vec::new());
        for (p, &bytes) in used.iter().enumerate() {
            sends.push(self.domains.exec(p).alloc_buffer(bytes)?);
            recvs.push(self.domains.exec(p).alloc_buffer(bytes)?);
        }
        Ok(Some(MessageRound { links: round, sends, recvs, used }))
    }
}

/// The points of a slot's box in direction `dir` along each axis: `depth` along the axes it
/// crosses, the interior plus `edge` layers on a side that is the grid's edge along the others;
/// `None` where it crosses an axis the slot is not exchanged along.
fn round_len<const D: usize>(
    slot: &Slot<D>,
    extent: [usize; D],
    dir: [i8; D],
    edges: &[[bool; 2]; D],
) -> Option<[usize; D]> {
    let len: [usize; D] = std::array::from_fn(|b| match dir[b] {
        0 => {
            let [low, high] = edges[b].map(|e| if e { slot.edge[b] } else { 0 });
            low + extent[b] + high
        }
        _ => slot.depth[b],
    });
    (!len.contains(&0)).then_some(len)
}

/// The boxes of a link's fields, at their offsets in the part's buffer: the layers its
/// neighbour takes (`send`: toward `dir`, the last interior layers along an axis it crosses
/// upward, the first downward), or its halo in direction `dir`.
fn link_boxes<'f, const D: usize>(
    slots: &[Slot<D>],
    link: &RoundLink<D>,
    edges: &[[bool; 2]; D],
    fields: &'f [ErasedField<'_, D>],
    send: bool,
) -> Result<Vec<BoxPart<'f, D>>, LaunchError> {
    let mut parts = Vec::new();
    for ((slot, field), offset) in slots.iter().zip(fields).zip(&link.offsets) {
        let Some(offset) = *offset else { continue };
        let (h, n) = (field.shape().halo_widths(), field.shape().interior());
        let Some(len) = round_len(slot, n, link.dir, edges) else { continue };
        let at = std::array::from_fn(|b| match (link.dir[b], send) {
            (0, _) => h[b] - if edges[b][0] { slot.edge[b] } else { 0 },
            (-1, true) => h[b],
            (_, true) => h[b] + n[b] - len[b],
            (-1, false) => h[b] - len[b],
            (_, false) => h[b] + n[b],
        });
        parts.push(field.part(at, len, link.at + offset)?);
    }
    Ok(parts)
}

/// The message tag of the halo in direction `dir` of subdomain `receiver` (of ranks holding
/// `per_rank` subdomains each): MPI matches tags per pair of ranks, so the receiver's index on
/// its rank and the direction tell every message apart.
fn round_tag<const D: usize>(receiver: usize, per_rank: usize, dir: [i8; D]) -> Result<i32, LaunchError> {
    let directions = 3usize.pow(D as u32);
    let code: usize = (0..D).map(|b| (dir[b] + 1) as usize * 3usize.pow(b as u32)).sum();
    let local = receiver % per_rank.max(1);
    i32::try_from(local * directions + code).ok().filter(|&t| t <= 32767).ok_or_else(|| {
        LaunchError::Decomposition(DistributionError::TooManySubdomains { receiver: local, limit: 32768 / directions })
    })
}

/// The halo in direction `dir`, for messages: `axis 1 high halo` for a face, `halo [-1, 1, 0]`
/// for an edge or a corner.
fn describe<const D: usize>(dir: [i8; D]) -> String {
    let crossed: Vec<usize> = (0..D).filter(|&b| dir[b] != 0).collect();
    match crossed[..] {
        [a] => face_halo(a, usize::from(dir[a] > 0)),
        _ => format!("halo {:?}", dir.map(i32::from)),
    }
}

/// One exchange in one round with messages ([`HaloExchange::message_round`]): pack, the copies
/// field to field within the process, the messages, unpack. `mark` adds the time since its last
/// call to a phase (for the timed exchange).
pub(super) fn exchange_round<E: Executor, const D: usize>(
    slots: &[Slot<D>],
    round: &mut MessageRound<E::Buffer, D>,
    edges: &[[[bool; 2]; D]],
    fields: &[Vec<ErasedField<'_, D>>],
    domains: &Domains<E, D>,
    mark: &mut dyn FnMut(fn(&mut PhaseTimes) -> &mut f64) -> Result<(), LaunchError>,
) -> Result<(), LaunchError> {
    let links = &round.links;
    let parts = domains.execs().len();
    let by_part: Vec<Vec<usize>> =
        (0..parts).map(|p| (0..links.len()).filter(|&l| links[l].local == p).collect()).collect();
    let remote = |l: usize| matches!(links[l].peer, Peer::Remote { .. });
    // Part `p`'s boxes of every message, in its buffers' order: sent (`send`) or received.
    let part_boxes = |p: usize, send: bool| -> Result<Vec<BoxPart<'_, D>>, LaunchError> {
        let mut boxes = Vec::new();
        for &l in by_part[p].iter().filter(|&&l| remote(l)) {
            boxes.extend(link_boxes(slots, &links[l], &edges[p], &fields[p], send)?);
        }
        Ok(boxes)
    };
    // Every message of a part packed into its send buffer at once.
    {
        let sends = Disjoint::new(&mut round.sends);
        domains.each_part(&|p| match part_boxes(p, true)? {
            boxes if boxes.is_empty() => Ok(()),
            // SAFETY: buffer `p` is part `p`'s: only this job touches it.
            boxes => domains.exec(p).pack(&boxes, unsafe { sends.get(p) }),
        })?;
    }
    mark(|t| &mut t.pack)?;
    // The neighbours in this process: field to field, in the same round.
    let sources: Vec<Vec<usize>> = by_part
        .iter()
        .map(|ls| ls.iter().filter_map(|&l| if let Peer::Local(j) = links[l].peer { Some(j) } else { None }).collect())
        .collect();
    if sources.iter().any(|s| !s.is_empty()) {
        copy_round(domains, &sources, &|p| {
            let mut boxes = Vec::new();
            for &l in &by_part[p] {
                if let Peer::Local(j) = links[l].peer {
                    let (into, from) = round_boxes(slots, links[l].dir, &edges[p], &fields[p], &fields[j])?;
                    boxes.push((domains.exec(j), into, from));
                }
            }
            let sources: Vec<_> = boxes.iter().map(|(e, into, from)| (*e, &into[..], &from[..])).collect();
            domains.exec(p).copy_boxes_from(&sources)
        })?;
    }
    let first = domains.local_range().start;
    let mine: Vec<usize> = (0..links.len()).filter(|&l| remote(l)).collect();
    if let Some(transport) = domains.device_transport() {
        let (mut sends, mut recvs) = (Vec::new(), Vec::new());
        for &l in &mine {
            let link = &links[l];
            let p = link.local;
            let address = |b: &E::Buffer| {
                b.device_address().map(|a| a + link.at as u64).ok_or_else(|| {
                    LaunchError::Decomposition(DistributionError::HostHalo {
                        halo: describe(link.dir),
                        subdomain: first + p,
                    })
                })
            };
            let back = link.dir.map(|c| -c);
            sends.push(DeviceMessage {
                local: p,
                address: address(&round.sends[p])?,
                bytes: link.bytes,
                peer: link.neighbour,
                order: round_tag(link.neighbour, parts, back)?,
                halo: describe(back),
            });
            recvs.push(DeviceMessage {
                local: p,
                address: address(&round.recvs[p])?,
                bytes: link.bytes,
                peer: link.neighbour,
                order: round_tag(first + p, parts, link.dir)?,
                halo: describe(link.dir),
            });
        }
        transport.exchange(&sends, &recvs)?;
    } else {
        {
            let (sends, used) = (Disjoint::new(&mut round.sends), &round.used);
            domains.each_part(&|p| match used[p] {
                0 => Ok(()),
                // SAFETY: as above.
                bytes => domains.exec(p).buffer_to_host(unsafe { sends.get(p) }, bytes),
            })?;
        }
        let (mut out, mut into) = (Vec::new(), Vec::new());
        for (p, (s, r)) in round.sends.iter_mut().zip(round.recvs.iter_mut()).enumerate() {
            if round.used[p] == 0 {
                continue;
            }
            let (mut s, mut r) = (&s.host_bytes()?[..round.used[p]], &mut r.host_bytes()?[..round.used[p]]);
            // A part's messages lie in its buffers in the order of its links.
            for &l in by_part[p].iter().filter(|&&l| remote(l)) {
                let link = &links[l];
                let Peer::Remote { rank, .. } = link.peer else { continue };
                let (message, rest) = s.split_at(link.bytes);
                s = rest;
                let back = link.dir.map(|c| -c);
                out.push(Message {
                    peer: rank,
                    tag: round_tag(link.neighbour, parts, back)?,
                    bytes: message,
                    what: format!("{} of subdomain {}", describe(back), link.neighbour),
                });
                let (message, rest) = std::mem::take(&mut r).split_at_mut(link.bytes);
                r = rest;
                into.push(Message {
                    peer: rank,
                    tag: round_tag(first + p, parts, link.dir)?,
                    bytes: message,
                    what: format!("{} of subdomain {}", describe(link.dir), first + p),
                });
            }
        }
        domains.world().messages(out, into)?;
        let (recvs, used) = (Disjoint::new(&mut round.recvs), &round.used);
        domains.each_part(&|p| match used[p] {
            0 => Ok(()),
            // SAFETY: as above.
            bytes => domains.exec(p).buffer_from_host(unsafe { recvs.get(p) }, bytes),
        })?;
    }
    mark(|t| &mut t.transfer)?;
    domains.each_part(&|p| match part_boxes(p, false)? {
        boxes if boxes.is_empty() => Ok(()),
        boxes => domains.exec(p).unpack(&round.recvs[p], &boxes),
    })?;
    mark(|t| &mut t.unpack)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::exchange::directions;

    #[test]
    fn tags_tell_every_halo_of_a_rank_apart_and_refuse_past_the_limit() {
        let mut seen = std::collections::HashSet::new();
        for receiver in 4..8 {
            for dir in directions::<3>() {
                assert!(seen.insert(round_tag(receiver, 4, dir).unwrap()), "{receiver} {dir:?}");
            }
        }
        assert_eq!(seen.len(), 4 * 26);
        // Receivers on different ranks share tags; on one rank they differ.
        assert_eq!(round_tag::<3>(1, 4, [1, 0, 0]).unwrap(), round_tag::<3>(5, 4, [1, 0, 0]).unwrap());
        assert!(round_tag::<3>(1213, 2000, [1, 1, 1]).is_err());
        assert!(round_tag::<3>(1212, 2000, [1, 1, 1]).is_ok());
    }

    #[test]
    fn halos_are_named_as_faces_or_by_direction() {
        assert_eq!(describe([0i8, 1, 0]), "axis 1 high halo");
        assert_eq!(describe([-1i8, 0]), "axis 0 low halo");
        assert_eq!(describe([-1i8, 1, 0]), "halo [-1, 1, 0]");
        // A halo in host memory where messages move device to device is refused by its name.
        let e = DistributionError::HostHalo { halo: describe([1i8, 0, -1]), subdomain: 7 };
        assert_eq!(
            e.to_string(),
            "exchange: the halo [1, 0, -1] of subdomain 7 is in host memory, but the domains move messages between \
             ranks device to device: give such domains GPU executors"
        );
    }
}
