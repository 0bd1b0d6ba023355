//! The shared plane tile of the 2.5D strategy (`Strategy::Stream25D`, Micikevicius; Sai et al. 2020
//! `st_smem`): a z-marching block keeps the current (c, m) plane of every field it reads at
//! in-plane offsets in shared memory, with the halo of the block, as vectors of `lanes` points.
//! Each thread writes the vector its o column already holds; the halo cells are loaded one plane
//! ahead into registers and written with it; the in-plane neighbours are then read from the tile
//! (16- or 8-byte shared-memory reads, consecutive per warp) instead of each thread loading them
//! from global memory. Two buffers alternate, so one barrier per plane orders the writes and the
//! reads. Measured with a hand-written kernel of this form (`benches/cuda-variants`, H200, 512³
//! f32): the 25-point update at 83.0% of copy bandwidth against 78.5% for z-marching.

use super::kernel::KernelParts;
use super::queue::Queue;
use super::text::vector_type;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One field's tile: its reach in vector groups along c and in rows along m.
struct FieldTile {
    field: usize,
    /// The field's name, for the halo registers' names.
    name: String,
    /// C vector type of the tile's cells.
    vt: String,
    /// C pointer to buffer 0 of the tile.
    var: String,
    /// Groups left and right of the block along c, rows below and above along m.
    left: i32,
    right: i32,
    below: i32,
    above: i32,
    byte_offset: u32,
}

/// The tiles of one kernel.
pub(super) struct PlaneTile {
    tiles: Vec<FieldTile>,
    /// Dynamic shared memory of the block (both buffers of every tile).
    pub bytes: u32,
    block: [i32; 2],
    lanes: i32,
}

impl FieldTile {
    fn width(&self, block: [i32; 2]) -> i32 {
        block[0] + self.left + self.right
    }
    fn rows(&self, block: [i32; 2]) -> i32 {
        block[1] + self.below + self.above
    }
}

impl PlaneTile {
    /// Marks the queues that the tile serves (in-plane values read at o offset 0 only, off the
    /// thread's own vector) and makes sure each tiled field has a queue holding the thread's own
    /// vector at o offset 0 (the value the thread writes into the tile).
    pub fn new(k: &KernelParts, queues: &mut Vec<Queue>, lanes: i32, block: [u32; 2]) -> Self {
        let mut reach: BTreeMap<usize, [i32; 4]> = BTreeMap::new();
        for q in queues.iter_mut() {
            if (q.group, q.dm) != (0, 0) && q.min == 0 && q.max == 0 {
                q.tiled = true;
                let r = reach.entry(q.field).or_insert([0; 4]);
                r[0] = r[0].max(-q.group);
                r[1] = r[1].max(q.group);
                r[2] = r[2].max(-q.dm);
                r[3] = r[3].max(q.dm);
            }
        }
        let block = [block[0] as i32, block[1] as i32];
        let mut tiles = Vec::new();
        let mut bytes = 0u32;
        for (&field, &[left, right, below, above]) in &reach {
            match queues.iter_mut().find(|q| q.field == field && q.group == 0 && q.dm == 0) {
                Some(q) => {
                    q.min = q.min.min(0);
                    q.max = q.max.max(0);
                }
                None => {
                    let var = format!("q_{}_0_0", k.field(field).name);
                    queues.push(Queue { field, var, group: 0, dm: 0, min: 0, max: 0, ahead: 0, tiled: false });
                }
            }
            let fa = k.field(field);
            let cell = fa.elem.size_bytes() as u32 * lanes as u32;
            let t = FieldTile {
                field,
                name: fa.name.clone(),
                vt: vector_type(fa.elem, lanes as u32),
                var: format!("t_{}", fa.name),
                left,
                right,
                below,
                above,
                byte_offset: bytes.div_ceil(16) * 16,
            };
            bytes = t.byte_offset + 2 * (t.width(block) * t.rows(block)) as u32 * cell;
            tiles.push(t);
        }
        PlaneTile { tiles, bytes, block, lanes }
    }

    /// Whether field `field`'s own-vector queue feeds a tile (its loads run for every thread whose
    /// vector the tile holds, not only for the threads that compute).
    pub fn feeds(&self, q: &Queue) -> bool {
        q.group == 0 && q.dm == 0 && self.tiles.iter().any(|t| t.field == q.field)
    }

    /// After the thread coordinates: `active` (the thread computes points), `loader` (its vector
    /// lies in some block's tile: the range plus the stencil's reach), the tile pointers, the halo
    /// cells each thread loads (plane 0's loaded here).
    pub fn declarations(&self, k: &KernelParts) -> String {
        let [tx, ty] = self.block;
        let l = self.lanes;
        let left = self.tiles.iter().map(|t| t.left).max().unwrap_or(0) * l;
        let right = self.tiles.iter().map(|t| t.right).max().unwrap_or(0) * l;
        let above = self.tiles.iter().map(|t| t.above).max().unwrap_or(0);
        let mut s = String::new();
        // Threads start at the line at or before the range's first point (`c` may be negative):
        // those before it compute nothing, and load only what lies in the stencil's reach.
        writeln!(s, "    const bool active = c >= 0 && c < n_c && m < n_m;").expect("write");
        writeln!(s, "    const bool loader = c >= -{left} && c < n_c + {right} && m < n_m + {above};").expect("write");
        writeln!(s, "    const int tid = threadIdx.x + {tx} * threadIdx.y;").expect("write");
        writeln!(s, "    const int c0 = c - (int)threadIdx.x * {l}, m0 = blockIdx.y * {ty};").expect("write");
        s.push_str("    extern __shared__ __align__(16) unsigned char smem[];\n");
        for t in &self.tiles {
            let (w, rows) = (t.width(self.block), t.rows(self.block));
            writeln!(s, "    {vt}* {var} = reinterpret_cast<{vt}*>(smem + {});", t.byte_offset, vt = t.vt, var = t.var)
                .expect("write");
            let name = k.name(t.field);
            let cells = w * rows - tx * ty;
            let side = t.left + t.right;
            for item in 0..(cells as u32).div_ceil((tx * ty) as u32) {
                let v = format!("_{}_{item}", t.name);
                let mut place = format!(
                    "        if (j < {lo_w}) {{ row = j / {w}; col = j % {w}; }}
        else if (j < {lohi_w}) {{ const int i = j - {lo_w}; row = {top} + i / {w}; col = i % {w}; }}\n",
                    lo_w = t.below * w,
                    lohi_w = (t.below + t.above) * w,
                    top = t.below + ty,
                );
                if side > 0 {
                    writeln!(
                        place,
                        "        else {{ const int i = j - {lohi_w}; row = {below} + i / {side}; const int x = i % {side}; col = x < {left} ? x : {tx} + x; }}",
                        lohi_w = (t.below + t.above) * w,
                        below = t.below,
                        left = t.left,
                    )
                    .expect("write");
                }
                write!(
                    s,
                    "    {vt} h{v};
    int ht{v};
    long long ho{v};
    bool hv{v};
    {{
        const int j = tid + {first};
        int row = 0, col = 0;
{place}        const int gm = m0 + row - {below}, gc = c0 + (col - {left}) * {l};
        ht{v} = row * {w} + col;
        ho{v} = (long long)(gm - m) * S_M + (gc - c);
        hv{v} = j < {cells} && gm < n_m + {above} && gc >= -{left_el} && gc < n_c + {right_el};
        if (hv{v}) h{v} = {load};
    }}
",
                    vt = t.vt,
                    first = item as i32 * tx * ty,
                    below = t.below,
                    left = t.left,
                    above = t.above,
                    left_el = t.left * l,
                    right_el = t.right * l,
                    load = vector_load(&t.vt, l, &name, &format!("idx + ho{v}")),
                )
                .expect("write");
            }
        }
        s
    }

    /// At the top of step `s`, once the queues' loads are issued: the thread's own vector and its
    /// halo cells into buffer `s & 1`, the halo cells of the next plane into registers, the
    /// barrier, and the tiled queues' reads.
    pub fn step(&self, k: &KernelParts, queues: &[Queue]) -> String {
        let [tx, ty] = self.block;
        let mut s = String::from("        const int b = s & 1;\n");
        for t in &self.tiles {
            let (w, rows) = (t.width(self.block), t.rows(self.block));
            let own = queues.iter().find(|q| q.field == t.field && q.group == 0 && q.dm == 0).expect("own vector");
            writeln!(
                s,
                "        if (loader) {var}[b * {buf} + (threadIdx.y + {below}) * {w} + threadIdx.x + {left}] = {own};",
                var = t.var,
                buf = w * rows,
                below = t.below,
                left = t.left,
                own = own.slot(0),
            )
            .expect("write");
            let name = k.name(t.field);
            let cells = w * rows - tx * ty;
            for item in 0..(cells as u32).div_ceil((tx * ty) as u32) {
                let v = format!("_{}_{item}", t.name);
                let next = vector_load(&t.vt, self.lanes, &name, &format!("idx + ho{v} + S_O"));
                write!(
                    s,
                    "        if (hv{v}) {{
            {var}[b * {buf} + ht{v}] = h{v};
            if (s + 1 < steps) h{v} = {next};
        }}
",
                    var = t.var,
                    buf = w * rows,
                )
                .expect("write");
            }
        }
        s.push_str("        __syncthreads();\n");
        for q in queues.iter().filter(|q| q.tiled) {
            let t = self.tiles.iter().find(|t| t.field == q.field).expect("tile");
            let (w, rows) = (t.width(self.block), t.rows(self.block));
            writeln!(
                s,
                "        {} = {}[b * {} + (threadIdx.y + {}) * {w} + threadIdx.x + {}];",
                q.slot(0),
                t.var,
                w * rows,
                t.below + q.dm,
                t.left + q.group
            )
            .expect("write");
        }
        s
    }
}

/// A read-only vector (or scalar, for one lane) load of `field` at `index`.
fn vector_load(vt: &str, lanes: i32, field: &str, index: &str) -> String {
    if lanes == 1 {
        format!("__ldg(&{field}[{index}])")
    } else {
        format!("__ldg(reinterpret_cast<const {vt}*>(&{field}[{index}]))")
    }
}
