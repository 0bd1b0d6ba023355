//! The depot kernel (seed 000's data depot): a stencil's point functions keep their values on
//! chip, so each value is computed once per block instead of once per point that reads it.
//!
//! A 2D block over (c, m) walks `planes` planes along o, one point per thread. Each point
//! function gets shared-memory storage sized by where the stencil needs its values (`Needs`,
//! the offsets of every call, composed through the functions that call it):
//! - needed on one plane offset only: one array over the block's tile widened by the offsets
//!   along c and m, recomputed every plane (its own point by each thread, the rest of the array,
//!   the *halo*, shared out among the threads);
//! - needed on several plane offsets: a ring over the tile holding one plane per offset; each
//!   plane the thread computes its own point of the newest plane only (the first plane also
//!   fills the older ones), and a plane offset needed beyond the thread's own point gets an
//!   array over the widened tile, its tile part copied from the ring and its halo computed.
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
use super::kernel::{layout_offset, KernelParts};
use super::{CudaKernel, StrategyError, MAX_SHARED_BYTES};
use crate::ir::{visit_exprs, ExprKind, Stmt};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// In-plane offsets (c_lo, c_hi, m_lo, m_hi), inclusive, relative to a point of the tile.
type Box2 = [i32; 4];

/// Where a point function's values are needed: per plane offset along o, the box of in-plane
/// offsets, relative to the points of the block's tile.
type Needs = BTreeMap<i32, Box2>;

fn grow(b: &mut Box2, o: Box2) {
    b[0] = b[0].min(o[0]);
    b[1] = b[1].max(o[1]);
    b[2] = b[2].min(o[2]);
    b[3] = b[3].max(o[3]);
}

fn shifted(b: Box2, dc: i32, dm: i32) -> Box2 {
    [b[0] + dc, b[1] + dc, b[2] + dm, b[3] + dm]
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

/// How one point function's values are stored.
struct Storage {
    needs: Needs,
    /// The box of every plane's offsets: where the function is computed at all.
    hull: Box2,
    /// Plane offsets of the ring (lowest, highest); `None` for a function needed on one plane.
    ring: Option<(i32, i32)>,
    /// Plane offsets with an array over the widened tile.
    arrays: Vec<i32>,
    /// C types of the outputs.
    types: Vec<&'static str>,
    /// Shared-memory byte offsets: the ring per output, then each array per output.
    ring_at: Vec<u32>,
    array_at: BTreeMap<i32, Vec<u32>>,
}

impl Storage {
    /// The stored region of the array at plane offset `dz`: the tile widened by its box (and
    /// always covering the tile), as (c_lo, c_hi, m_lo, m_hi) in tile coordinates.
    fn region(&self, dz: i32, block: [i32; 2]) -> Box2 {
        let b = self.needs[&dz];
        [b[0].min(0), block[0] - 1 + b[1].max(0), b[2].min(0), block[1] - 1 + b[3].max(0)]
    }
}

/// The depot kernel's plan: storage per point function.
struct Depot<'a> {
    k: &'a KernelParts<'a>,
    block: [i32; 2],
    store: Vec<Storage>,
}

/// Needs of every point function, composed from the body's calls through the functions' own
/// calls (a function only calls earlier ones, so one backward pass suffices). A function on
/// several planes is computed for every tile point its hull covers on every plane of its ring,
/// so its callees are needed at its hull on each of them.
fn needs(k: &KernelParts) -> Vec<Needs> {
    let n = k.ir.point_fns.len();
    let mut needs = vec![Needs::new(); n];
    let add = |needs: &mut Vec<Needs>, func: usize, dz: i32, b: Box2| {
        grow(needs[func].entry(dz).or_insert(b), b);
    };
    for (func, [dc, dm, dz]) in calls(k, &k.ir.body) {
        add(&mut needs, func, dz, [dc, dc, dm, dm]);
    }
    for g in (0..n).rev() {
        let planes: Vec<(i32, Box2)> = match (needs[g].keys().next(), needs[g].keys().next_back()) {
            (Some(&lo), Some(&hi)) if lo < hi => {
                let hull = hull(&needs[g]);
                (lo..=hi).map(|dz| (dz, hull)).collect()
            }
            _ => needs[g].iter().map(|(&dz, &b)| (dz, b)).collect(),
        };
        for (h, [rc, rm, ro]) in calls(k, &k.ir.point_fns[g].body) {
            for &(dz, b) in &planes {
                add(&mut needs, h, dz + ro, shifted(b, rc, rm));
            }
        }
    }
    needs
}

fn hull(needs: &Needs) -> Box2 {
    let mut it = needs.values();
    let mut b = *it.next().expect("a needed function");
    it.for_each(|o| grow(&mut b, *o));
    b
}

/// Where a value is computed and read: the plane offset and the C expressions of the tile
/// coordinates (`tc`, `tm`: the thread's own point or a halo point).
struct Site<'a> {
    depot: &'a Depot<'a>,
    dz: i32,
}

impl Access for Site<'_> {
    fn load(&self, field: usize, offset: [i32; 3]) -> String {
        let along = layout_offset(self.depot.k, self.dz);
        self.depot.k.global_load(field, "idx", std::array::from_fn(|a| offset[a] + along[a]))
    }
    fn store(&self, field: usize, value: &str) -> String {
        format!("{}[idx] = {value};", self.depot.k.name(field))
    }
    fn point_value(&self, func: usize, output: usize, offset: [i32; 3]) -> String {
        let [dc, dm, dz] = self.depot.k.geo.layout_offset_of(offset);
        self.depot.read(func, output, self.dz + dz, dc, dm)
    }
}

impl Depot<'_> {
    fn tile(&self) -> i32 {
        self.block[0] * self.block[1]
    }

    /// C expression of output `output` of function `func` at plane offset `dz`, at tile point
    /// (`tc` + `dc`, `tm` + `dm`).
    fn read(&self, func: usize, output: usize, dz: i32, dc: i32, dm: i32) -> String {
        let s = &self.store[func];
        if s.array_at.contains_key(&dz) {
            let r = s.region(dz, self.block);
            let w = r[1] - r[0] + 1;
            return format!(
                "{}[(tm{}) * {w} + (tc{})]",
                var(func, output, Some(dz)),
                signed(dm - r[2]),
                signed(dc - r[0])
            );
        }
        let (lo, hi) = s.ring.unwrap_or_else(|| panic!("point function {func} has no storage at plane {dz}"));
        assert!((lo..=hi).contains(&dz), "point function {func}: plane {dz} outside its ring {lo}..={hi}");
        format!(
            "{}[((to + {}) % {}) * {} + (tm{}) * {} + (tc{})]",
            var(func, output, None),
            dz - lo,
            hi - lo + 1,
            self.tile(),
            signed(dm),
            self.block[0],
            signed(dc)
        )
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
            signed(h[1]),
            h[2],
            signed(h[3])
        )
    }

    /// Computes function `func` at plane offset `dz` at the current (`tc`, `tm`) and `idx`, and
    /// writes its outputs with `target(output)` (a C lvalue).
    fn compute(&self, func: usize, dz: i32, target: &dyn Fn(usize) -> String, pad: &str) -> String {
        let f = &self.k.ir.point_fns[func];
        let mut s = format!("{pad}{{\n");
        s.push_str(&print_stmts(self.k.ir, &f.body, &Site { depot: self, dz }, pad.len() + 4));
        for (o, local) in f.outputs.iter().enumerate() {
            writeln!(s, "{pad}    {} = {};", target(o), self.k.ir.locals[*local].name).expect("write");
        }
        writeln!(s, "{pad}}}").expect("write");
        s
    }

    /// The halo of the array of `func` at plane offset `dz`: every point of its region outside
    /// the tile, shared out among the block's threads.
    fn halo(&self, func: usize, dz: i32, pad: &str) -> String {
        let s = &self.store[func];
        let r = s.region(dz, self.block);
        let (w, h) = (r[1] - r[0] + 1, r[3] - r[2] + 1);
        if (w, h) == (self.block[0], self.block[1]) {
            return String::new();
        }
        let [bx, by] = self.block;
        let mut out = format!(
            "{pad}for (int __h = __tid; __h < {}; __h += {}) {{
{pad}    const int tc = __h % {w}{}, tm = __h / {w}{};
{pad}    if ((tc >= 0 && tc < {bx} && tm >= 0 && tm < {by}) || !({})) continue;
{pad}    const long long idx = base + tc + tm * S_M;
",
            w * h,
            self.tile(),
            signed(r[0]),
            signed(r[2]),
            self.condition(func, s.needs[&dz])
        );
        out.push_str(&self.compute(func, dz, &|o| self.read(func, o, dz, 0, 0), &format!("{pad}    ")));
        writeln!(out, "{pad}}}").expect("write");
        out
    }
}

/// Which functions' storage `body` reads at a point other than the reader's own (in-plane
/// offset not zero).
fn read_across(k: &KernelParts, body: &[Stmt]) -> BTreeSet<usize> {
    calls(k, body).into_iter().filter(|(_, [dc, dm, _])| (*dc, *dm) != (0, 0)).map(|(f, _)| f).collect()
}

/// Which functions' storage `body` reads at all.
fn read_any(k: &KernelParts, body: &[Stmt]) -> BTreeSet<usize> {
    calls(k, body).into_iter().map(|(f, _)| f).collect()
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

/// `" + 3"`, `" - 2"` or `""`.
fn signed(v: i32) -> String {
    match v.cmp(&0) {
        std::cmp::Ordering::Equal => String::new(),
        std::cmp::Ordering::Greater => format!(" + {v}"),
        std::cmp::Ordering::Less => format!(" - {}", -v),
    }
}

/// Prints the depot kernel: a `block_x` × `block_y` block walking `planes` planes along o.
pub(super) fn print(k: &KernelParts, block_x: u32, block_y: u32, planes: u32) -> Result<CudaKernel, StrategyError> {
    let block = [block_x as i32, block_y as i32];
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
    let mut store = Vec::new();
    for (g, needs) in needs(k).into_iter().enumerate() {
        let f = &k.ir.point_fns[g];
        let types: Vec<&'static str> = f.outputs.iter().map(|l| c_type(k.ir.locals[*l].ty)).collect();
        if needs.is_empty() {
            store.push(Storage {
                needs,
                hull: [0; 4],
                ring: None,
                arrays: Vec::new(),
                types,
                ring_at: Vec::new(),
                array_at: BTreeMap::new(),
            });
            continue;
        }
        let hull = hull(&needs);
        let (lo, hi) = (*needs.keys().next().expect("needed"), *needs.keys().next_back().expect("needed"));
        let ring = (lo < hi).then_some((lo, hi));
        let arrays: Vec<i32> =
            needs.iter().filter(|(_, b)| ring.is_none() || **b != [0; 4]).map(|(dz, _)| *dz).collect();
        let ring_at = match ring {
            Some((lo, hi)) => types.iter().map(|t| place((hi - lo + 1) * tile, t)).collect(),
            None => Vec::new(),
        };
        let mut s = Storage { needs, hull, ring, arrays, types, ring_at, array_at: BTreeMap::new() };
        for &dz in &s.arrays.clone() {
            let r = s.region(dz, block);
            let count = (r[1] - r[0] + 1) * (r[3] - r[2] + 1);
            let at = s.types.iter().map(|t| place(count, t)).collect();
            s.array_at.insert(dz, at);
        }
        store.push(s);
    }
    if bytes > MAX_SHARED_BYTES {
        return Err(StrategyError::BadBlock {
            strategy: format!("depot_{block_x}x{block_y}x{planes}"),
            reason: format!(
                "the point functions' values need {bytes} bytes of shared memory per block, more than {MAX_SHARED_BYTES}: use a smaller block"
            ),
        });
    }
    let d = Depot { k, block, store };
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
            if st.ring.is_some() {
                writeln!(s, "    {t}* const {} = reinterpret_cast<{t}*>(__smem + {});", var(g, o, None), st.ring_at[o])
                    .expect("write");
            }
            for (&dz, at) in &st.array_at {
                writeln!(s, "    {t}* const {} = reinterpret_cast<{t}*>(__smem + {});", var(g, o, Some(dz)), at[o])
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
    let mut barriers = 0;
    let mut barrier = |s: &mut String, dirty: &mut BTreeSet<usize>, reads: &BTreeSet<usize>| {
        if !dirty.is_disjoint(reads) {
            writeln!(s, "{pad}__syncthreads();").expect("write");
            dirty.clear();
            barriers += 1;
        }
    };
    for (g, st) in d.store.iter().enumerate() {
        if st.needs.is_empty() {
            continue;
        }
        let body = &k.ir.point_fns[g].body;
        let (across, any) = (read_across(k, body), read_any(k, body));
        let own_box = match st.ring {
            Some(_) => st.hull,
            None => st.needs.values().next().copied().expect("needed"),
        };
        let own = |dz: i32, target: &dyn Fn(usize) -> String| {
            format!(
                "{pad}if ({}) {{\n{}{pad}}}\n",
                d.condition(g, own_box),
                d.compute(g, dz, target, &format!("{pad}    "))
            )
        };
        match st.ring {
            Some((lo, hi)) => {
                if lo < hi {
                    // The first plane also fills the ring's older planes.
                    let mut first = String::new();
                    let mut reads_dirty = dirty.clone();
                    barrier(&mut first, &mut reads_dirty, &across);
                    for dz in lo..hi {
                        first.push_str(&own(dz, &|o| ring_slot(&d, g, o, dz)));
                    }
                    writeln!(s, "{pad}if (to == 0) {{\n{first}{pad}}}").expect("write");
                }
                barrier(&mut s, &mut dirty, &across);
                s.push_str(&own(hi, &|o| ring_slot(&d, g, o, hi)));
                for &dz in &st.arrays {
                    writeln!(s, "{pad}if ({}) {{", d.condition(g, st.needs[&dz])).expect("write");
                    for o in 0..st.types.len() {
                        writeln!(s, "{pad}    {} = {};", d.read(g, o, dz, 0, 0), ring_slot(&d, g, o, dz))
                            .expect("write");
                    }
                    writeln!(s, "{pad}}}").expect("write");
                    barrier(&mut s, &mut dirty, &any);
                    s.push_str(&d.halo(g, dz, pad));
                }
            }
            None => {
                let dz = st.arrays[0];
                barrier(&mut s, &mut dirty, &across);
                s.push_str(&own(dz, &|o| d.read(g, o, dz, 0, 0)));
                barrier(&mut s, &mut dirty, &any);
                s.push_str(&d.halo(g, dz, pad));
            }
        }
        dirty.insert(g);
    }
    barrier(&mut s, &mut dirty, &read_across(k, &k.ir.body));
    writeln!(s, "{pad}if (active) {{").expect("write");
    s.push_str(&print_stmts(k.ir, &k.ir.body, &Site { depot: &d, dz: 0 }, pad.len() + 4));
    writeln!(s, "{pad}}}").expect("write");
    if barriers > 0 || !dirty.is_empty() {
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

/// The ring slot of output `output` of function `func` at plane offset `dz`, at the thread's
/// own point.
fn ring_slot(d: &Depot, func: usize, output: usize, dz: i32) -> String {
    let s = &d.store[func];
    let (lo, hi) = s.ring.expect("a ring");
    format!("{}[((to + {}) % {}) * {} + __tid]", var(func, output, None), dz - lo, hi - lo + 1, d.tile())
}
