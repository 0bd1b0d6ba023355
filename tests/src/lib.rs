//! Helpers shared by the integration tests in `tests/tests/`: a tiny deterministic RNG, fields
//! filled with random values or poisoned with a marked NaN, iteration over a range in global
//! coordinates, and a bitwise comparison of two fields (halo included).
//!
//! The tests compare the loop nest `#[stencil]` generates with plain hand-written loops over
//! global coordinates that read neighbours through [`Field::get`] (see [`nb`]).
//!
//! [`canonical`] holds the test stencils that several tests (and the CPU benchmark) share, each
//! with its source text and a plain-Rust reference.

pub mod adjoint_check;
pub mod canonical;
pub mod distributed_check;
pub mod exchange_check;
pub mod fuzz;
pub mod held_check;
pub mod reducing;
pub mod sweeping;

/// The guide's chapters (`docs/guide/src`): their Rust blocks run as doctests of this crate
/// (`cargo test -p stencil-tests --doc`), so a block that no longer compiles or whose assertions
/// fail breaks the tests. The one block marked `ignore` needs a GPU (`Gpu::run_steps_with`).
#[cfg(doctest)]
pub mod guide {
    #[doc = include_str!("../../docs/guide/src/getting-started.md")]
    pub struct GettingStarted;
    #[doc = include_str!("../../docs/guide/src/writing-stencils.md")]
    pub struct WritingStencils;
    #[doc = include_str!("../../docs/guide/src/fields-ranges-regions.md")]
    pub struct FieldsRangesRegions;
    #[doc = include_str!("../../docs/guide/src/boundaries-halos.md")]
    pub struct BoundariesHalos;
    #[doc = include_str!("../../docs/guide/src/gpus.md")]
    pub struct Gpus;
    #[doc = include_str!("../../docs/guide/src/reductions.md")]
    pub struct Reductions;
    #[doc = include_str!("../../docs/guide/src/column-sweeps.md")]
    pub struct ColumnSweeps;
    #[doc = include_str!("../../docs/guide/src/distributed.md")]
    pub struct Distributed;
    #[doc = include_str!("../../docs/guide/src/io-checkpoints.md")]
    pub struct IoCheckpoints;
    #[doc = include_str!("../../docs/guide/src/adjoints.md")]
    pub struct Adjoints;
}

use std::ops::{Add, Div, Mul, Neg, Sub};
use stencil_runtime::{Element, Field, Loop, Shape};

/// SplitMix64: a 64-bit generator with a one-word state, good enough for test inputs and
/// reproducible from its seed.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`, with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform integer in `lo..=hi`.
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        assert!(lo <= hi, "empty interval {lo}..={hi}");
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }
}

/// A floating-point field element, for tests written once for `f32` and `f64`. The operators
/// are IEEE operations of the type itself, so a reference written with them rounds exactly as
/// the generated nest does when it evaluates the same expression in the same order.
pub trait Real:
    Element
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// A quiet NaN with a recognisable payload, written into outputs before a launch: any point
    /// a launch leaves alone keeps exactly these bits.
    const POISON: Self;
    /// The value nearest to `v` (exact for the small constants the tests use).
    fn lit(v: f64) -> Self;
    /// The bits, widened to 64.
    fn bits(self) -> u64;
    /// `self.sqrt()`.
    fn sqrt(self) -> Self;
    /// `self.max(other)`.
    fn max(self, other: Self) -> Self;
    /// `self * a + b` with one rounding (`mul_add`).
    fn mul_add(self, a: Self, b: Self) -> Self;
}

impl Real for f32 {
    const POISON: f32 = f32::from_bits(0x7fe5_5a5a);
    fn lit(v: f64) -> f32 {
        v as f32
    }
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    fn max(self, other: f32) -> f32 {
        f32::max(self, other)
    }
    fn mul_add(self, a: f32, b: f32) -> f32 {
        f32::mul_add(self, a, b)
    }
}

impl Real for f64 {
    const POISON: f64 = f64::from_bits(0x7ffd_5a5a_5a5a_5a5a);
    fn lit(v: f64) -> f64 {
        v
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    fn max(self, other: f64) -> f64 {
        f64::max(self, other)
    }
    fn mul_add(self, a: f64, b: f64) -> f64 {
        f64::mul_add(self, a, b)
    }
}

/// A field whose every point (halo included) holds [`Real::POISON`].
pub fn poisoned<T: Real, const D: usize>(shape: Shape<D>) -> Field<T, D> {
    Field::filled(shape, T::POISON)
}

/// A field whose every point (halo included) is uniform in `[lo, hi)`.
pub fn random<T: Real, const D: usize>(shape: Shape<D>, rng: &mut SplitMix64, lo: f64, hi: f64) -> Field<T, D> {
    Field::from_fn(shape, |_| T::lit(rng.uniform(lo, hi)))
}

/// `g + off`, axis by axis.
pub fn shifted<const D: usize>(g: [isize; D], off: [isize; D]) -> [isize; D] {
    std::array::from_fn(|a| g[a] + off[a])
}

/// The value of `f` at offset `off` from the global point `g`, through [`Field::get`]: the
/// reference implementations read neighbours only through this, so a reference that leaves the
/// field panics with the coordinate instead of reading garbage.
#[track_caller]
pub fn nb<T: Element, const D: usize>(f: &Field<T, D>, g: [isize; D], off: [isize; D]) -> T {
    let p = shifted(g, off);
    f.get(p).unwrap_or_else(|| panic!("reference read {p:?} (point {g:?} offset {off:?}) outside {:?}", f.shape()))
}

/// Whether the global point `g` of a field of `shape` lies in `range`.
pub fn range_contains<const D: usize>(range: &Loop<D>, shape: &Shape<D>, g: [isize; D]) -> bool {
    let halo = shape.halo_widths();
    (0..D).all(|a| {
        let s = g[a] + halo[a] as isize;
        s >= range.begin()[a] as isize && s < range.end()[a]
    })
}

/// Calls `f` with the global coordinate of every point of `range` (storage coordinates of a field
/// of `shape`), in no particular order; nothing for an empty or inverted range.
pub fn for_each_in_range<const D: usize>(range: &Loop<D>, shape: &Shape<D>, mut f: impl FnMut([isize; D])) {
    if range.points() == 0 {
        return;
    }
    let halo = shape.halo_widths();
    let (begin, len) = (range.begin(), range.len_per_axis());
    for flat in 0..range.points() {
        let mut rest = flat;
        let g = std::array::from_fn(|a| {
            let s = begin[a] + rest % len[a];
            rest /= len[a];
            s as isize - halo[a] as isize
        });
        f(g);
    }
}

/// Calls `f` with the global coordinate of every point of a field of `shape`, halo included.
pub fn for_each_point<const D: usize>(shape: &Shape<D>, mut f: impl FnMut([isize; D])) {
    for s in shape.storage_points() {
        f(shape.to_global(s));
    }
}

/// Asserts that `got` and `want` hold the same bits at every point, halo included (NaN payloads
/// compare too), naming the first point that differs and how many do.
#[track_caller]
pub fn assert_bits_eq<T: Real, const D: usize>(got: &Field<T, D>, want: &Field<T, D>, context: &str) {
    assert_eq!(got.shape(), want.shape(), "{context}: shapes differ");
    let mut first = None;
    let mut count = 0usize;
    for_each_point(got.shape(), |g| {
        let (a, b) = (got.get(g).expect("inside"), want.get(g).expect("inside"));
        if a.bits() != b.bits() {
            count += 1;
            first.get_or_insert((g, a, b));
        }
    });
    if let Some((g, a, b)) = first {
        panic!(
            "{context}: {count} of {} points differ; first at global {g:?}: got {a:?} ({:#x}), want {b:?} ({:#x}) \
             (POISON means the point was left untouched)",
            got.shape().points(),
            a.bits(),
            b.bits()
        );
    }
}
