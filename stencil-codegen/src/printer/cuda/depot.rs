//! The depot kernel (the data depot of Xu et al. 2019): a stencil's point functions keep their values on
//! chip, so each value is computed once per block instead of once per point that reads it.
//!
//! A 2D block over (c, m) walks `planes` planes along o, one point per thread. Each point
//! function gets shared-memory storage sized by where the stencil needs its values (`Needs`,
//! the offsets of every call, composed through the functions that call it):
//! - on a plane offset where other threads read its values (offsets along c or m): an array over
//!   the block's tile widened by those offsets, recomputed every plane (its own point by each
//!   thread, the rest of the array, the *halo*, shared out among consecutive threads);
//! - on several plane offsets, where a value costs at least `RING_MIN_FLOPS` operations: a ring
//!   over the tile holding one plane per offset; each plane the thread computes its own point
//!   of the newest plane only (the first plane also fills the older ones), and the arrays of
//!   the ring's planes take their tile part from it;
//! - anywhere else (the thread's own point on a plane, a cheap function off the plane): computed
//!   where it is read, as the inlined form does (computed once either way, or a value of a few
//!   operations that is not worth shared memory and a barrier).
//!
//! For the Euler stage (primitive state `w` at 13 points, face fluxes `fx`, `fy`, `fz` at two
//! points each) that is: `w` once per cell and plane (plus its halo of 2 on the plane), each face
//! flux once per face (plus one row of halo), where the inlined form computes six face fluxes and
//! thirteen primitive states per cell.
//!
//! A value is computed only at points where the launch's reach check covers its reads (`guard`):
//! within the range widened by the offsets at which it is needed, per axis. Values are computed
//! whether or not a branch of a caller reads them, which is safe because point functions write
//! nothing and divide no integers (the frontend refuses both). Barriers separate the writes of a
//! function's storage from reads by other threads; a thread's own point needs none.

use super::c_body::{c_type, print_stmts, Access};
use super::kernel::KernelParts;
use super::text::plus32;
use super::{CudaKernel, StrategyError, MAX_SHARED_BYTES};
use crate::analysis::stmts_flops;
use crate::ir::{visit_exprs, BinOp, ExprKind, Stmt};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// In-plane offsets (c_lo, c_hi, m_lo, m_hi), inclusive, relative to a point of the tile.
type Box2 = [i32; 4];

/// Where a point function's values are needed: per plane offset along o, the box of in-plane
/// offsets, relative to the points of the block's tile.
type Needs = BTreeMap<i32, Box2>;

/// Values computed where they are read: (function, offset in layout axes) → their C variables.
type Inline = BTreeMap<(usize, [i32; 3]), Vec<String>>;

/// The box of the point itself.
const OWN: Box2 = [0; 4];

/// Fewest operations of a value ([`recompute_cost`]) for a ring of planes: cheaper values needed
/// at the thread's own point off the plane (a difference, a product) are recomputed there. Measured on the Euler
/// stage (H100, 256³ f64, `depot_32x8x16`): the primitive state (13 operations) in a ring of 5
/// planes, 111 KB per block, 5.31 Gcell/s; recomputed where the z faces read it, 60 KB per
/// block but 92 registers (2 blocks per SM either way), 4.86 Gcell/s (5.20 with registers
/// capped for 3 blocks, which spills).
const RING_MIN_FLOPS: usize = 8;

/// What computing a value again where it is read costs, in operations: its flops, plus three
/// more per float division (a division is a sequence of several instructions on the GPU; `f64`
/// has no divide unit) and one per field load. The scaled cotangents of an adjoint
/// (`w̄ / m / (1 + d)`, 3 flops, 2 divisions, 4 loads: 13) get a ring; a difference of two loads
/// (1 flop, 2 loads) does not.
fn recompute_cost(body: &[Stmt]) -> usize {
    let (mut divisions, mut loads) = (0, 0);
    visit_exprs(body, &mut |e| match &e.kind {
        ExprKind::Binary(BinOp::Div, ..) if e.ty.is_float() => divisions += 1,
        ExprKind::Load { .. } => loads += 1,
        _ => {}
    });
    stmts_flops(body) + 3 * divisions + loads
}

fn grow(b: &mut Box2, o: Box2) {
    b[0] = b[0].min(o[0]);
    b[1] = b[1].max(o[1]);
    b[2] = b[2].min(o[2]);
    b[3] = b[3].max(o[3]);
}

fn shifted(b: Box2, dc: i32, dm: i32) -> Box2 {
    [b[0] + dc, b[1] + dc, b[2] + dm, b[3] + dm]
}

fn plus3(a: [i32; 3], b: [i32; 3]) -> [i32; 3] {
    std::array::from_fn(|i| a[i] + b[i])
}

fn hull(needs: &Needs) -> Box2 {
    let mut it = needs.values();
    let mut b = *it.next().expect("a needed function");
    it.for_each(|o| grow(&mut b, *o));
    b
}

/// The point values (function, offset in layout axes) `body` reads.
fn calls(k: &KernelParts, body: &[Stmt]) -> Vec<(usize, [i32; 3])> {
    let mut out = Vec::new();
    visit_exprs(body, &mut |e| {
        if let ExprKind::PointValue { func, offset, .. } = e.kind {
            let at = (func, k.geo.layout_offset_of(offset));
            if !out.contains(&at) {
                out.push(at);
            }
        }
    });
    out
}

/// Needs of every point function, composed from the body's calls through the functions' own
/// calls (a function only calls earlier ones, so one backward pass suffices), and which
/// functions get a ring. A function in a ring is computed for every tile point its hull covers
/// on every plane of the ring, so its callees are needed at its hull on each of them.
fn plan(k: &KernelParts) -> (Vec<Needs>, Vec<bool>) {
    let n = k.ir.point_fns.len();
    let mut needs = vec![Needs::new(); n];
    let mut rings = vec![false; n];
    let add = |needs: &mut Vec<Needs>, func: usize, dz: i32, b: Box2| {
        grow(needs[func].entry(dz).or_insert(b), b);
    };
    for (func, [dc, dm, dz]) in calls(k, &k.ir.body) {
        add(&mut needs, func, dz, [dc, dc, dm, dm]);
    }
    for g in (0..n).rev() {
        let body = &k.ir.point_fns[g].body;
        let planes: Vec<(i32, Box2)> = match (needs[g].keys().next(), needs[g].keys().next_back()) {
            (Some(&lo), Some(&hi)) if lo < hi && recompute_cost(body) >= RING_MIN_FLOPS => {
                rings[g] = true;
                let hull = hull(&needs[g]);
                (lo..=hi).map(|dz| (dz, hull)).collect()
            }
            _ => needs[g].iter().map(|(&dz, &b)| (dz, b)).collect(),
        };
        for (h, [rc, rm, ro]) in calls(k, body) {
            for &(dz, b) in &planes {
                add(&mut needs, h, dz + ro, shifted(b, rc, rm));
            }
        }
    }
    (needs, rings)
}

/// How one point function's values are stored.
struct Storage {
    needs: Needs,
    /// The box of every plane's offsets: where the function is computed at all.
    hull: Box2,
    /// Plane offsets of the ring (lowest, highest).
    ring: Option<(i32, i32)>,
    /// Shared-memory byte offsets of the ring, per output.
    ring_at: Vec<u32>,
    /// Plane offsets with an array over the widened tile, and the arrays' byte offsets per output.
    array_at: BTreeMap<i32, Vec<u32>>,
    /// C types of the outputs.
    types: Vec<&'static str>,
}

impl Storage {
    /// The stored region of the array at plane offset `dz`: the tile widened by its box (and
    /// always covering the tile), as (c_lo, c_hi, m_lo, m_hi) in tile coordinates.
    fn region(&self, dz: i32, block: [i32; 2]) -> Box2 {
        let b = self.needs[&dz];
        [b[0].min(0), block[0] - 1 + b[1].max(0), b[2].min(0), block[1] - 1 + b[3].max(0)]
    }

    /// Whether the value at `p` (layout axes, from the reading thread's own point) is stored
    /// (else computed where read): on a plane with an array, or in the ring at the thread's own
    /// point (another thread's ring entry is never read: a needs box is relative to the point
    /// read for, so a function computed off the tile point it is needed for can read a callee
    /// whose box on that plane is the point itself at another thread's point).
    fn stores(&self, p: [i32; 3]) -> bool {
        let in_ring = self.ring.is_some_and(|(lo, hi)| (lo..=hi).contains(&p[2]));
        self.array_at.contains_key(&p[2]) || (in_ring && (p[0], p[1]) == (0, 0))
    }
}

/// The depot kernel's plan: storage per point function.
struct Depot<'a> {
    k: &'a KernelParts<'a>,
    block: [i32; 2],
    store: Vec<Storage>,
    /// Values computed where they are read so far (their C variables are numbered).
    inlined: Cell<usize>,
}

/// Where a value is computed: `at` (layout axes) from the point (`tc`, `tm`) of the plane the
/// block is on (whose linear index is `idx`), and the values computed there for it.
struct Site<'a> {
    depot: &'a Depot<'a>,
    at: [i32; 3],
    inline: Inline,
}

impl Access for Site<'_> {
    fn load(&self, field: usize, offset: [i32; 3]) -> String {
        let k = self.depot.k;
        let layout = plus3(k.geo.layout_offset_of(offset), self.at);
        let mut ir = [0; 3];
        for (l, &axis) in k.geo.layout.iter().enumerate() {
            if axis < 3 {
                ir[axis] = layout[l];
            }
        }
        k.global_load(field, "idx", ir)
    }
    fn store(&self, field: usize, value: &str) -> String {
        format!("{}[idx] = {value};", self.depot.k.name(field))
    }
    fn point_value(&self, func: usize, output: usize, offset: [i32; 3]) -> String {
        let r = self.depot.k.geo.layout_offset_of(offset);
        match self.inline.get(&(func, r)) {
            Some(vars) => vars[output].clone(),
            None => {
                let [dc, dm, dz] = plus3(self.at, r);
                self.depot.read(func, output, dz, dc, dm)
            }
        }
    }
}

impl Depot<'_> {
    fn tile(&self) -> i32 {
        self.block[0] * self.block[1]
    }

    /// C expression of output `output` of function `func` at plane offset `dz`, at tile point
    /// (`tc` + `dc`, `tm` + `dm`), from its storage.
    fn read(&self, func: usize, output: usize, dz: i32, dc: i32, dm: i32) -> String {
        let s = &self.store[func];
        if s.array_at.contains_key(&dz) {
            let r = s.region(dz, self.block);
            let w = r[1] - r[0] + 1;
            return format!(
                "{}[(tm{}) * {w} + (tc{})]",
                var(func, output, Some(dz)),
                plus32(dm - r[2]),
                plus32(dc - r[0])
            );
        }
        let (lo, hi) = s.ring.unwrap_or_else(|| panic!("point function {func} has no storage at plane {dz}"));
        assert!((lo..=hi).contains(&dz), "point function {func}: plane {dz} outside its ring {lo}..={hi}");
        assert!((dc, dm) == (0, 0), "point function {func}: its ring is read at the thread's own point only");
        ring_slot(self, func, output, dz)
    }

    /// The C condition under which function `func` is computed at tile point (`tc`, `tm`) for
    /// storage whose box is `b`: inside the tile widened by `b`, and inside the range widened by
    /// the function's hull (where the launch checked its reads).
    fn condition(&self, func: usize, b: Box2) -> String {
        let h = self.store[func].hull;
        let [bx, by] = self.block;
        format!(
            "tc >= {} && tc < {} && tm >= {} && tm < {} && c0 + tc >= {} && c0 + tc < n_c{} && m0 + tm >= {} && m0 + tm < n_m{}",
            b[0],
            bx + b[1],
            b[2],
            by + b[3],
            h[0],
            plus32(h[1]),
            h[2],
            plus32(h[3])
        )
    }

    /// Statements computing the values `body`, evaluated at `at`, reads that are not stored
    /// (declared as C variables first), and the map from each to its variables.
    fn unstored(&self, body: &[Stmt], at: [i32; 3], pad: &str) -> (String, Inline) {
        let mut code = String::new();
        let mut inline = BTreeMap::new();
        for (h, r) in calls(self.k, body) {
            let p = plus3(at, r);
            if self.store[h].stores(p) {
                continue;
            }
            let n = self.inlined.get();
            self.inlined.set(n + 1);
            let vars: Vec<String> = (0..self.store[h].types.len()).map(|o| format!("__iv{n}_{o}")).collect();
            for (v, t) in vars.iter().zip(&self.store[h].types) {
                writeln!(code, "{pad}{t} {v};").expect("write");
            }
            code.push_str(&self.compute(h, p, &|o| vars[o].clone(), None, pad));
            inline.insert((h, r), vars);
        }
        (code, inline)
    }

    /// Computes function `func` at `at` from the current (`tc`, `tm`) and `idx`, and writes its
    /// outputs with `target(output)` (a C lvalue), only where `guard` holds if given.
    fn compute(
        &self,
        func: usize,
        at: [i32; 3],
        target: &dyn Fn(usize) -> String,
        guard: Option<&str>,
        pad: &str,
    ) -> String {
        let f = &self.k.ir.point_fns[func];
        let inner = format!("{pad}    ");
        let (pre, inline) = self.unstored(&f.body, at, &inner);
        let mut s = format!("{pad}{{\n{pre}");
        s.push_str(&print_stmts(self.k.ir, &f.body, &Site { depot: self, at, inline }, inner.len()));
        let stores: String = f
            .outputs
            .iter()
            .enumerate()
            .map(|(o, local)| format!("{} = {}; ", target(o), self.k.ir.locals[*local].name))
            .collect();
        match guard {
            Some(g) => writeln!(s, "{inner}if ({g}) {{ {stores}}}"),
            None => writeln!(s, "{inner}{}", stores.trim_end()),
        }
        .expect("write");
        writeln!(s, "{pad}}}").expect("write");
        s
    }

    /// The functions whose storage code computing `body` at `at` reads, and whether a read is
    /// of a point another thread wrote (`across`: the site is not the thread's own point, or
    /// the offset is along the plane).
    fn reads(&self, body: &[Stmt], at: [i32; 3], halo: bool, out: &mut BTreeMap<usize, bool>) {
        for (h, r) in calls(self.k, body) {
            let p = plus3(at, r);
            if self.store[h].stores(p) {
                *out.entry(h).or_insert(false) |= halo || (p[0], p[1]) != (0, 0);
            } else {
                self.reads(&self.k.ir.point_fns[h].body, p, halo, out);
            }
        }
    }

    /// A barrier, if code computing `body` at `at` reads storage another thread wrote since the
    /// last one (`dirty`).
    fn barrier(&self, body: &[Stmt], at: [i32; 3], halo: bool, dirty: &mut BTreeSet<usize>, out: &mut String) {
        let mut reads = BTreeMap::new();
        self.reads(body, at, halo, &mut reads);
        if reads.iter().any(|(h, across)| *across && dirty.contains(h)) {
            writeln!(out, "        __syncthreads();").expect("write");
            dirty.clear();
        }
    }

    /// The halo of the array of `func` at plane offset `dz`: every point of its region outside
    /// the tile, numbered row by row (the rows below and above the tile, then the ends of the
    /// tile's rows) and shared out among consecutive threads, so that a halo of a few points
    /// costs one warp, not one warp per point.
    fn halo(&self, func: usize, dz: i32, pad: &str) -> String {
        let s = &self.store[func];
        let r = s.region(dz, self.block);
        let [bx, by] = self.block;
        let w = r[1] - r[0] + 1;
        let (below, above, left, right) = (-r[2], r[3] - (by - 1), -r[0], r[1] - (bx - 1));
        let (rows, ends) = (w * (below + above), by * (left + right));
        if rows + ends == 0 {
            return String::new();
        }
        // Row `q` of the rows outside the tile, and point `q` of the row ends.
        let (row_m, end_c) = (two_runs(below, above, r[2], by), two_runs(left, right, r[0], bx));
        let (rows_pos, ends_pos) = (
            format!("const int __q = __h / {w}; tm = {row_m}; tc = __h % {w}{};", plus32(r[0])),
            format!(
                "const int __k = __h - {rows}, __q = __k % {}; tm = __k / {}; tc = {end_c};",
                left + right,
                left + right
            ),
        );
        let position = match (rows, ends) {
            (0, _) => format!("{{ {ends_pos} }}"),
            (_, 0) => format!("{{ {rows_pos} }}"),
            _ => format!("if (__h < {rows}) {{ {rows_pos} }} else {{ {ends_pos} }}"),
        };
        let mut out = format!(
            "{pad}for (int __h = __tid; __h < {}; __h += {}) {{
{pad}    int tc, tm;
{pad}    {position}
{pad}    if (!({})) continue;
{pad}    const long long idx = base + tc + tm * S_M;
",
            rows + ends,
            self.tile(),
            self.condition(func, s.needs[&dz])
        );
        out.push_str(&self.compute(func, [0, 0, dz], &|o| self.read(func, o, dz, 0, 0), None, &format!("{pad}    ")));
        writeln!(out, "{pad}}}").expect("write");
        out
    }

    /// Function `func`'s own point at plane offset `dz` (where `b` says it is computed), into
    /// `target`. Every thread computes it, at its point clamped into where the function may be
    /// computed (inside the tile widened by `b` and the range widened by the hull, a non-empty
    /// region: the block holds a point of the range), and stores it only where its point itself
    /// qualifies: the code has no branch, so the compiler may interleave the block's independent
    /// functions.
    fn own(&self, func: usize, dz: i32, b: Box2, target: &dyn Fn(usize) -> String, pad: &str) -> String {
        let h = self.store[func].hull;
        let [bx, by] = self.block;
        let clamp = |t: &str, lo: i32, hi: i32, origin: &str, h_lo: i32, n: &str, h_hi: i32| {
            format!("min(max({t}, max({lo}, {h_lo} - {origin})), min({hi}, {n} - 1{} - {origin}))", plus32(h_hi))
        };
        let inner = format!("{pad}    ");
        format!(
            "{pad}{{
{inner}const bool __ok = {};
{inner}const int __tc = {}, __tm = {};
{inner}const int tc = __tc, tm = __tm;
{inner}const long long idx = base + tc + tm * S_M;
{}{pad}}}
",
            self.condition(func, b),
            clamp("tc", b[0], bx - 1 + b[1], "c0", h[0], "n_c", h[1]),
            clamp("tm", b[2], by - 1 + b[3], "m0", h[2], "n_m", h[3]),
            self.compute(func, [0, 0, dz], target, Some("__ok"), &inner)
        )
    }
}

/// The functions with storage, in groups of consecutive ones whose code reads no storage of
/// another in its group (computed together, between two barriers).
fn groups(d: &Depot) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (g, st) in d.store.iter().enumerate() {
        if st.ring.is_none() && st.array_at.is_empty() {
            continue;
        }
        let mut reads = BTreeMap::new();
        let ring = st.ring.map_or(Vec::new(), |(lo, hi)| (lo..=hi).collect());
        for dz in ring.into_iter().chain(st.array_at.keys().copied()) {
            d.reads(&d.k.ir.point_fns[g].body, [0, 0, dz], true, &mut reads);
        }
        match groups.last_mut() {
            Some(last) if !last.iter().any(|f| reads.contains_key(f)) => last.push(g),
            _ => groups.push(vec![g]),
        }
    }
    groups
}

/// The shared array of output `output` of function `func`: its ring (`dz` = `None`) or its
/// array at plane offset `dz`.
fn var(func: usize, output: usize, dz: Option<i32>) -> String {
    match dz {
        None => format!("__dr{func}_{output}"),
        Some(dz) if dz < 0 => format!("__da{func}_{output}_n{}", -dz),
        Some(dz) => format!("__da{func}_{output}_{dz}"),
    }
}

/// The ring slot of output `output` of function `func` at plane offset `dz`, at the thread's
/// own point.
fn ring_slot(d: &Depot, func: usize, output: usize, dz: i32) -> String {
    let (lo, hi) = d.store[func].ring.expect("a ring");
    format!("{}[((to + {}) % {}) * {} + __tid]", var(func, output, None), dz - lo, hi - lo + 1, d.tile())
}

/// C: the coordinate of `__q` over two runs of `first` and `second` points, which start at
/// `a` and at `b` (the rows below and above the tile, or the ends left and right of it).
fn two_runs(first: i32, second: i32, a: i32, b: i32) -> String {
    match (first, second) {
        (_, 0) => format!("__q{}", plus32(a)),
        (0, _) => format!("__q{}", plus32(b)),
        _ => format!("(__q < {first} ? __q{} : __q{})", plus32(a), plus32(b - first)),
    }
}

/// The storage of every point function and the shared memory it takes per block.
fn storage(k: &KernelParts, block: [i32; 2]) -> (Vec<Storage>, u32) {
    let tile = block[0] * block[1];
    let mut bytes = 0u32;
    let mut place = |count: i32, ty: &str| {
        let size = match ty {
            "double" => 8,
            "bool" => 1,
            _ => 4,
        };
        let at = bytes.div_ceil(16) * 16;
        bytes = at + count as u32 * size;
        at
    };
    let (needs, rings) = plan(k);
    let mut store = Vec::new();
    for (g, needs) in needs.into_iter().enumerate() {
        let f = &k.ir.point_fns[g];
        let types: Vec<&'static str> = f.outputs.iter().map(|l| c_type(k.ir.locals[*l].ty)).collect();
        let hull = if needs.is_empty() { OWN } else { hull(&needs) };
        let ring =
            rings[g].then(|| (*needs.keys().next().expect("needed"), *needs.keys().next_back().expect("needed")));
        let ring_at = match ring {
            Some((lo, hi)) => types.iter().map(|t| place((hi - lo + 1) * tile, t)).collect(),
            None => Vec::new(),
        };
        let mut s = Storage { needs, hull, ring, ring_at, array_at: BTreeMap::new(), types };
        let arrays: Vec<i32> = s.needs.iter().filter(|(_, b)| **b != OWN).map(|(dz, _)| *dz).collect();
        for dz in arrays {
            let r = s.region(dz, block);
            let count = (r[1] - r[0] + 1) * (r[3] - r[2] + 1);
            let at = s.types.iter().map(|t| place(count, t)).collect();
            s.array_at.insert(dz, at);
        }
        store.push(s);
    }
    (store, bytes)
}

/// Prints the depot kernel: a `block_x` × `block_y` block walking `planes` planes along o.
pub(super) fn print(k: &KernelParts, block_x: u32, block_y: u32, planes: u32) -> Result<CudaKernel, StrategyError> {
    let block = [block_x as i32, block_y as i32];
    let (store, bytes) = storage(k, block);
    if bytes > MAX_SHARED_BYTES {
        return Err(StrategyError::BadBlock {
            strategy: format!("depot_{block_x}x{block_y}x{planes}"),
            reason: format!(
                "the point functions' values need {bytes} bytes of shared memory per block, more than {MAX_SHARED_BYTES}: use a smaller block or another strategy (`range.with_strategy(..)`)"
            ),
        });
    }
    let d = Depot { k, block, store, inlined: Cell::new(0) };
    let mut s = k.header(block_x * block_y);
    writeln!(
        s,
        "    const int tc = threadIdx.x, tm = threadIdx.y, __tid = tc + {block_x} * tm;
    const int c0 = blockIdx.x * {block_x}, m0 = blockIdx.y * {block_y}, o0 = blockIdx.z * {planes};
    const bool active = c0 + tc < n_c && m0 + tm < n_m;
    extern __shared__ __align__(16) unsigned char __smem[];"
    )
    .expect("write");
    for (g, st) in d.store.iter().enumerate() {
        for (o, t) in st.types.iter().enumerate() {
            let arrays = st.array_at.iter().map(|(&dz, at)| (Some(dz), at[o]));
            for (dz, at) in st.ring_at.get(o).map(|&at| (None, at)).into_iter().chain(arrays) {
                writeln!(s, "    {t}* const {} = reinterpret_cast<{t}*>(__smem + {at});", var(g, o, dz))
                    .expect("write");
            }
        }
    }
    writeln!(
        s,
        "    const int steps = min({planes}, n_o - o0);
    for (int to = 0; to < steps; ++to) {{
        const long long base = origin + c0 + m0 * S_M + (o0 + to) * S_O;
        const long long idx = base + tc + tm * S_M;"
    )
    .expect("write");
    let pad = "        ";
    // Functions whose storage was written since the last barrier.
    let mut dirty: BTreeSet<usize> = BTreeSet::new();
    for group in groups(&d) {
        // One barrier before the group if any of its code reads what other threads wrote.
        for &g in &group {
            let st = &d.store[g];
            let body = &k.ir.point_fns[g].body;
            let ring = st.ring.map_or(Vec::new(), |(lo, hi)| (lo..=hi).collect());
            for dz in ring.into_iter().chain(st.array_at.keys().copied()) {
                d.barrier(body, [0, 0, dz], true, &mut dirty, &mut s);
            }
        }
        // The first plane also fills the rings' older planes.
        for &g in &group {
            if let Some((lo, hi)) = d.store[g].ring {
                let first: String = (lo..hi)
                    .map(|dz| d.own(g, dz, d.store[g].hull, &|o| ring_slot(&d, g, o, dz), &format!("{pad}    ")))
                    .collect();
                writeln!(s, "{pad}if (to == 0) {{\n{first}{pad}}}").expect("write");
            }
        }
        // The own points (independent of each other: one stretch of code), then the tile parts of
        // the rings' arrays, then the halos.
        for &g in &group {
            let st = &d.store[g];
            match st.ring {
                Some((_, hi)) => s.push_str(&d.own(g, hi, st.hull, &|o| ring_slot(&d, g, o, hi), pad)),
                None => {
                    for (&dz, b) in st.needs.iter().filter(|(dz, _)| st.array_at.contains_key(dz)) {
                        s.push_str(&d.own(g, dz, *b, &|o| d.read(g, o, dz, 0, 0), pad));
                    }
                }
            }
        }
        for &g in &group {
            let st = &d.store[g];
            for &dz in st.array_at.keys().filter(|_| st.ring.is_some()) {
                writeln!(s, "{pad}if ({}) {{", d.condition(g, st.needs[&dz])).expect("write");
                for o in 0..st.types.len() {
                    writeln!(s, "{pad}    {} = {};", d.read(g, o, dz, 0, 0), ring_slot(&d, g, o, dz)).expect("write");
                }
                writeln!(s, "{pad}}}").expect("write");
            }
        }
        for &g in &group {
            for &dz in d.store[g].array_at.keys() {
                s.push_str(&d.halo(g, dz, pad));
            }
        }
        dirty.extend(group);
    }
    d.barrier(&k.ir.body, [0; 3], false, &mut dirty, &mut s);
    let inner = format!("{pad}    ");
    let (pre, inline) = d.unstored(&k.ir.body, [0; 3], &inner);
    write!(s, "{pad}if (active) {{\n{pre}").expect("write");
    s.push_str(&print_stmts(k.ir, &k.ir.body, &Site { depot: &d, at: [0; 3], inline }, inner.len()));
    writeln!(s, "{pad}}}").expect("write");
    if s.contains("__syncthreads") || d.store.iter().any(|st| st.ring.is_some()) {
        // The next plane overwrites storage other threads may still read.
        writeln!(s, "{pad}__syncthreads();").expect("write");
    }
    s.push_str("    }\n}\n");
    Ok(CudaKernel {
        source: s,
        entry: k.entry.clone(),
        block: [block_x, block_y, 1],
        points_per_block: [block_x, block_y, planes],
        shared_bytes: bytes,
        line_points: 1,
    })
}
