//! Halo messages: fields seen as bytes ([`ErasedField`]), boxes of them ([`BoxPart`]) that an
//! executor packs into, or unpacks from, one contiguous message buffer ([`MessageBuffer`]).
//! What [`HaloExchange`](crate::domain::HaloExchange) is made of: several fields of different
//! element types and depths travel in one buffer per neighbour.

use crate::cpu::{Choice, SettingError};
use crate::domain::DistributionError;
use crate::error::LaunchError;
use crate::field::{Element, Shape};
use crate::stencil::args::FieldStorage;
use std::marker::PhantomData;

/// A field borrowed mutably for an exchange, its element type erased: its shape, the address
/// and home of its storage, and its element size (4 or 8 bytes).
#[derive(Debug)]
pub struct ErasedField<'a, const D: usize> {
    shape: Shape<D>,
    address: u64,
    home: usize,
    element: &'static str,
    elem_bytes: usize,
    _borrow: PhantomData<&'a mut ()>,
}

impl<'a, const D: usize> ErasedField<'a, D> {
    /// The field `field`, borrowed for as long as the erased view lives.
    pub fn of<T: Element, F: FieldStorage<T, D>>(field: &'a mut F) -> Self {
        ErasedField {
            shape: *field.shape(),
            address: field.address(),
            home: field.home(),
            element: T::NAME,
            elem_bytes: std::mem::size_of::<T>(),
            _borrow: PhantomData,
        }
    }

    /// A field known by its storage alone: what the distributed executor passes for the parts
    /// of the fields it exchanges. The caller keeps the storage alive and unaliased by Rust
    /// references for `'a`.
    pub(crate) fn from_raw(
        shape: Shape<D>,
        address: u64,
        home: usize,
        element: &'static str,
        elem_bytes: usize,
    ) -> Self {
        ErasedField { shape, address, home, element, elem_bytes, _borrow: PhantomData }
    }

    /// The field's shape.
    pub fn shape(&self) -> &Shape<D> {
        &self.shape
    }

    /// The element type's name (`f32`, `f64`, ...).
    pub fn element(&self) -> &'static str {
        self.element
    }

    /// Bytes per element.
    pub fn elem_bytes(&self) -> usize {
        self.elem_bytes
    }

    /// Where the storage is ([`FieldStorage::home`]).
    pub fn home(&self) -> usize {
        self.home
    }

    /// The box of `len` points at storage coordinate `at`, placed at byte `offset` of a message
    /// buffer. Errors if the box leaves the field.
    pub(crate) fn part(&self, at: [usize; D], len: [usize; D], offset: usize) -> Result<BoxPart<'_, D>, LaunchError> {
        let ext = self.shape.extent();
        if let Some(a) = (0..D).find(|&a| at[a] + len[a] > ext[a]) {
            return Err(DistributionError::BoxOutside {
                at: at.to_vec(),
                len: len.to_vec(),
                shape: self.shape.describe(),
                axis: a,
            }
            .into());
        }
        Ok(BoxPart {
            shape: self.shape,
            address: self.address,
            home: self.home,
            elem_bytes: self.elem_bytes,
            at,
            len,
            offset,
            _field: PhantomData,
        })
    }
}

/// A box of an [`ErasedField`] and where it sits in a message buffer: its points in the field's
/// layout order (contiguous axis fastest), `elem_bytes` each, from byte `offset` on. Made only by
/// the halo exchange (from a mutably borrowed field, the box checked to lie inside it).
#[derive(Clone, Copy, Debug)]
pub struct BoxPart<'f, const D: usize> {
    shape: Shape<D>,
    address: u64,
    home: usize,
    elem_bytes: usize,
    at: [usize; D],
    len: [usize; D],
    offset: usize,
    _field: PhantomData<&'f ()>,
}

impl<const D: usize> BoxPart<'_, D> {
    /// The field's shape.
    pub fn shape(&self) -> &Shape<D> {
        &self.shape
    }
    /// The address of element 0 of the field's storage.
    pub fn address(&self) -> u64 {
        self.address
    }
    /// Where the field's storage is ([`FieldStorage::home`]).
    pub fn home(&self) -> usize {
        self.home
    }
    /// Bytes per element (4 or 8).
    pub fn elem_bytes(&self) -> usize {
        self.elem_bytes
    }
    /// Storage coordinate of the box's first point.
    pub fn at(&self) -> [usize; D] {
        self.at
    }
    /// Points per axis.
    pub fn len(&self) -> [usize; D] {
        self.len
    }
    /// Whether the box holds no point.
    pub fn is_empty(&self) -> bool {
        self.len.contains(&0)
    }
    /// Points in the box.
    pub fn points(&self) -> usize {
        self.len.iter().product()
    }
    /// Byte offset of the box's first point in the buffer.
    pub fn offset(&self) -> usize {
        self.offset
    }
    /// Bytes the box takes in the buffer.
    pub fn bytes(&self) -> usize {
        self.points() * self.elem_bytes
    }
}

/// Checks that every part fits in a buffer of `capacity` bytes and lives in memory `home`.
pub(crate) fn check_parts<const D: usize>(
    parts: &[BoxPart<'_, D>],
    capacity: usize,
    home: usize,
    exec: &str,
) -> Result<(), LaunchError> {
    for p in parts {
        if p.offset + p.bytes() > capacity {
            return Err(DistributionError::BoxOverflow { bytes: p.bytes(), offset: p.offset, capacity }.into());
        }
        if p.home != home {
            return Err(DistributionError::ForeignMemory { shape: p.shape.describe(), executor: exec.into() }.into());
        }
    }
    Ok(())
}

/// Checks that the boxes of a copy from field to field pair up (same count, and per pair the same
/// points per axis, element size and element order), that every box written lives in memory
/// `home` and every box read in `src_home`.
pub(crate) fn check_pairs<const D: usize>(
    into: &[BoxPart<'_, D>],
    from: &[BoxPart<'_, D>],
    (home, src_home): (usize, usize),
    exec: &str,
) -> Result<(), LaunchError> {
    let describe = |parts: &[BoxPart<'_, D>]| {
        let boxes: Vec<String> =
            parts.iter().map(|p| format!("{:?} of {} ({} B)", p.len, p.shape.describe(), p.elem_bytes)).collect();
        format!("{} box{}: {}", parts.len(), if parts.len() == 1 { "" } else { "es" }, boxes.join(", "))
    };
    let paired = into.len() == from.len()
        && into.iter().zip(from).all(|(a, b)| {
            a.len == b.len
                && a.elem_bytes == b.elem_bytes
                && a.shape.element_order().axes::<D>() == b.shape.element_order().axes::<D>()
        });
    if !paired {
        return Err(DistributionError::BoxPairs { into: describe(into), from: describe(from) }.into());
    }
    for (parts, home) in [(into, home), (from, src_home)] {
        if let Some(p) = parts.iter().find(|p| p.home != home) {
            return Err(DistributionError::ForeignMemory { shape: p.shape.describe(), executor: exec.into() }.into());
        }
    }
    Ok(())
}

/// How halos between subdomains of one process travel (`STENCIL_DIRECT_HALOS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DirectHalos {
    /// Through message buffers, as between ranks (`0`).
    Off,
    /// Field to field where the executors reach each other's memory (`1`, the default): on GPUs
    /// a side of one box of long rows by the copy engine, a side of several boxes by one kernel.
    On,
    /// Field to field, on GPUs by a kernel for every box (`kernel`; for comparisons).
    Kernel,
    /// Field to field, on GPUs by the copy engine for every box of long rows (`engine`; for
    /// comparisons).
    Engine,
}

/// `STENCIL_DIRECT_HALOS`: how halos travel within a process.
static DIRECT: Choice<DirectHalos> = Choice::new(
    "STENCIL_DIRECT_HALOS",
    &[
        ("1", DirectHalos::On),
        ("0", DirectHalos::Off),
        ("kernel", DirectHalos::Kernel),
        ("engine", DirectHalos::Engine),
    ],
    DirectHalos::On,
    "0 (halos through message buffers), 1 (copied field to field within a process, the default), \
     kernel (field to field, by a kernel on GPUs) or engine (field to field, by the copy engine on \
     GPUs where rows are long)",
);

/// `STENCIL_DIRECT_HALOS`, read once; an error for a value it does not take.
pub(crate) fn direct_halos() -> Result<DirectHalos, SettingError> {
    DIRECT.get()
}

/// `STENCIL_ONE_ROUND_HALOS`: whether an exchange moves every face, edge and corner in one round
/// (each subdomain takes every halo from the neighbour that owns it, the diagonal ones included,
/// after one wait for all of them) or axis by axis (edges and corners travelling with the later
/// axes). The same halos either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OneRound {
    /// Axis by axis (`0`).
    Off,
    /// One round for halos copied field to field and for messages between ranks through MPI;
    /// messages over NCCL go axis by axis (`1`, the default).
    On,
    /// One round for messages over NCCL too (`all`).
    All,
}

static ONE_ROUND: Choice<OneRound> = Choice::new(
    "STENCIL_ONE_ROUND_HALOS",
    &[("1", OneRound::On), ("0", OneRound::Off), ("all", OneRound::All)],
    OneRound::On,
    "1 (halos copied field to field and messages through MPI in one round, the default), 0 (axis \
     by axis) or all (messages over NCCL in one round too)",
);

/// `STENCIL_ONE_ROUND_HALOS`, read once; an error for a value it does not take.
pub(crate) fn one_round_halos() -> Result<OneRound, SettingError> {
    ONE_ROUND.get()
}

/// A contiguous buffer for halo messages: host memory, or device memory with a pinned host
/// mirror for messages between ranks.
pub trait MessageBuffer: Send + Sync {
    /// The buffer's size in bytes.
    fn capacity(&self) -> usize;
    /// The host bytes of the buffer (the mirror on a device: filled by
    /// [`Messages::buffer_to_host`](crate::Messages::buffer_to_host), read by
    /// [`Messages::buffer_from_host`](crate::Messages::buffer_from_host)).
    fn host_bytes(&mut self) -> Result<&mut [u8], LaunchError>;
    /// The device address of the first byte, for buffers in device memory (a device transport
    /// sends from and receives into it); `None` for host memory.
    fn device_address(&self) -> Option<u64> {
        None
    }
}

/// The host's message buffer: 8-byte aligned host memory.
#[derive(Debug)]
pub struct HostBuffer {
    words: Vec<u64>,
    bytes: usize,
}

impl HostBuffer {
    /// `bytes` zero bytes.
    pub fn new(bytes: usize) -> Self {
        HostBuffer { words: vec![0; bytes.div_ceil(8)], bytes }
    }

    /// The buffer's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: a u64 slice viewed as its bytes (alignment 1), within its length.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.bytes) }
    }

    /// The buffer's bytes, writable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above; every byte pattern is a valid u64.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.bytes) }
    }
}

impl MessageBuffer for HostBuffer {
    fn capacity(&self) -> usize {
        self.bytes
    }
    fn host_bytes(&mut self) -> Result<&mut [u8], LaunchError> {
        Ok(self.as_bytes_mut())
    }
}

/// Runs of one box in layout order: for each row along the contiguous axis, the element offset
/// of its first point in the field's storage, in order (`len[contiguous]` points each).
pub(crate) fn rows<'p, const D: usize>(part: &'p BoxPart<'_, D>) -> impl Iterator<Item = usize> + 'p {
    part.shape.box_rows(part.at, part.len).1
}

/// The values' little-endian bytes (what a message between ranks carries).
pub(crate) fn to_le_bytes<T: Element>(values: &[T], out: &mut Vec<u8>) {
    if cfg!(target_endian = "little") {
        // SAFETY: elements are plain numbers (f32, f64, i32, u32) without padding, so their
        // memory is `size_of_val` initialised bytes, in little-endian order on this target.
        out.extend_from_slice(unsafe {
            std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
        });
    } else {
        values.iter().for_each(|v| v.put_le(out));
    }
}

/// The values of little-endian `bytes` ([`to_le_bytes`] reversed; trailing bytes of a partial
/// element are ignored).
pub(crate) fn from_le_bytes<T: Element>(bytes: &[u8]) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    let n = bytes.len() / size;
    if cfg!(target_endian = "little") {
        let mut out = vec![T::default(); n];
        // SAFETY: `out` holds `n` elements, `n * size` bytes; every bit pattern is a valid
        // number of the element types (f32, f64, i32, u32); the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), n * size) };
        out
    } else {
        bytes.chunks_exact(size).map(T::get_le).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::{Host, Messages};
    use crate::field::{Field, Order};

    /// The text of a `BoxPairs` refusal of the copy `what`; panics on any other outcome.
    fn box_pairs(what: &str, result: Result<(), LaunchError>) -> String {
        match result {
            Err(LaunchError::Decomposition(e @ DistributionError::BoxPairs { .. })) => e.to_string(),
            other => panic!("{what}: expected DistributionError::BoxPairs, got {other:?}"),
        }
    }

    #[test]
    fn boxes_that_do_not_pair_up_are_refused_with_what_each_pair_needs() {
        // A column of 1 x 6 points: the low x halo at x = 0, the last interior column at x = 8.
        fn edge<'f>(f: &'f ErasedField<'_, 2>, x: usize) -> BoxPart<'f, 2> {
            f.part([x, 1], [1, 6], 0).unwrap()
        }
        let shape = Shape::new([8, 6]).halo(1);
        let mut fields = (Field::<f64, 2>::zeros(shape), Field::<f64, 2>::zeros(shape));
        let (mut narrow, mut columns) =
            (Field::<f32, 2>::zeros(shape), Field::<f64, 2>::zeros(shape.order(Order::Kij)));
        let (into, from) = (ErasedField::of(&mut fields.0), ErasedField::of(&mut fields.1));
        let (narrow, columns) = (ErasedField::of(&mut narrow), ErasedField::of(&mut columns));
        let written = [edge(&into, 0)];
        assert!(check_pairs(&written, &[edge(&from, 8)], (0, 0), "host").is_ok());
        let needs = "each pair needs the same points per axis, element size and element order";
        let unpaired = [
            ("no box", vec![]),
            ("two boxes", vec![edge(&from, 8), edge(&from, 7)]),
            ("other points per axis", vec![from.part([8, 1], [1, 5], 0).unwrap()]),
            ("other element size", vec![edge(&narrow, 8)]),
            ("other element order", vec![edge(&columns, 8)]),
        ];
        for (what, read) in unpaired {
            let text = box_pairs(what, check_pairs(&written, &read, (0, 0), "host"));
            let counts = format!("the boxes read ({} box", read.len());
            assert!(
                text.contains(needs) && text.contains(&counts) && text.contains("the boxes written (1 box: [1, 6] of"),
                "{what}: {text}"
            );
        }
        // The host's copy from field to field refuses them too.
        box_pairs("the host's copy", Host.copy_boxes(&written, &Host, &[edge(&narrow, 8)]));
    }

    #[test]
    fn one_round_is_the_default_zero_goes_by_axes_and_all_takes_nccl_too() {
        assert_eq!(ONE_ROUND.parse(None).unwrap(), OneRound::On);
        assert_eq!(ONE_ROUND.parse(Some("1")).unwrap(), OneRound::On);
        assert_eq!(ONE_ROUND.parse(Some("0")).unwrap(), OneRound::Off);
        assert_eq!(ONE_ROUND.parse(Some("all")).unwrap(), OneRound::All);
        let e = ONE_ROUND.parse(Some("axes")).unwrap_err().to_string();
        assert!(e.contains("STENCIL_ONE_ROUND_HALOS") && e.contains("\"axes\"") && e.contains("axis by axis"), "{e}");
    }

    #[test]
    fn the_direct_setting_takes_zero_one_kernel_and_engine() {
        assert_eq!(DIRECT.parse(None).unwrap(), DirectHalos::On);
        assert_eq!(DIRECT.parse(Some("1")).unwrap(), DirectHalos::On);
        assert_eq!(DIRECT.parse(Some("0")).unwrap(), DirectHalos::Off);
        assert_eq!(DIRECT.parse(Some("kernel")).unwrap(), DirectHalos::Kernel);
        assert_eq!(DIRECT.parse(Some("engine")).unwrap(), DirectHalos::Engine);
        let e = DIRECT.parse(Some("on")).unwrap_err().to_string();
        assert!(e.contains("STENCIL_DIRECT_HALOS") && e.contains("\"on\"") && e.contains("0 (halos through"), "{e}");
    }
}
