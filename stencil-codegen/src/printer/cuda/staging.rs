//! Shared-memory tiles for the strategies that stage neighbours on chip: which fields get a tile,
//! its dimensions (block plus reach), and its place in the block's dynamic shared memory.

use super::c_body::c_type;
use super::kernel::KernelParts;

/// One field's tile.
pub(super) struct Tile {
    /// The field parameter.
    pub field: usize,
    /// The C variable pointing at it.
    pub var: String,
    /// Points per layout axis (block plus reach on both sides; 1 along o for a plane).
    pub dims: [u32; 3],
    /// Reach below the block per layout axis (as a positive count).
    pub lo: [u32; 3],
    /// Reach above the block per layout axis.
    pub hi: [u32; 3],
    /// Byte offset in the block's shared memory.
    pub byte_offset: u32,
    /// Element type in C.
    pub elem: &'static str,
}

impl Tile {
    /// Flat index of thread coordinates `t` (C expressions) shifted by a layout offset.
    pub fn index(&self, t: &[&str; 3], offset: [i32; 3]) -> String {
        let coord = |a: usize| {
            let shift = self.lo[a] as i32 + offset[a];
            if self.dims[a] == 1 {
                "0".to_string()
            } else if shift == 0 {
                t[a].to_string()
            } else {
                format!("({} + {shift})", t[a])
            }
        };
        let [dc, dm, _] = self.dims;
        format!("{} + {dc} * ({} + {dm} * {})", coord(0), coord(1), coord(2))
    }
}

/// The tiles of one kernel and the shared memory they take.
pub(super) struct SharedLayout {
    pub tiles: Vec<Tile>,
    pub bytes: u32,
}

impl SharedLayout {
    /// Tiles for every input read at a non-zero (c, m) offset — with `with_o` also at a non-zero
    /// o offset (a 3D tile); without, a plane (the 2.5D scheme keeps o-neighbours in registers).
    pub fn new(k: &KernelParts, block: [u32; 3], with_o: bool) -> Self {
        let mut tiles = Vec::new();
        let mut bytes = 0u32;
        for fa in k.inputs() {
            let staged = fa.offsets.iter().any(|o| {
                let l = k.geo.layout_offset_of(*o);
                l[0] != 0 || l[1] != 0 || (with_o && l[2] != 0)
            });
            if !staged {
                continue;
            }
            let (lo, hi) = k.reach(fa);
            let axes = if with_o { 3 } else { 2 };
            let lo: [u32; 3] = std::array::from_fn(|a| if a < axes { (-lo[a]) as u32 } else { 0 });
            let hi: [u32; 3] = std::array::from_fn(|a| if a < axes { hi[a] as u32 } else { 0 });
            let dims: [u32; 3] = std::array::from_fn(|a| if a < axes { block[a] + lo[a] + hi[a] } else { 1 });
            let size = fa.elem.size_bytes() as u32;
            bytes = bytes.div_ceil(16) * 16;
            tiles.push(Tile {
                field: fa.param,
                var: format!("s_{}", fa.name),
                dims,
                lo,
                hi,
                byte_offset: bytes,
                elem: c_type(fa.elem),
            });
            bytes += dims.iter().product::<u32>() * size;
        }
        SharedLayout { tiles, bytes }
    }

    /// The tile of `field`, if it has one.
    pub fn tile(&self, field: usize) -> Option<&Tile> {
        self.tiles.iter().find(|t| t.field == field)
    }

    /// C declarations of the tile pointers into dynamic shared memory.
    pub fn declarations(&self) -> String {
        if self.tiles.is_empty() {
            return String::new();
        }
        let mut s = String::from("    extern __shared__ __align__(16) unsigned char smem[];\n");
        for t in &self.tiles {
            s.push_str(&format!(
                "    {elem}* {var} = reinterpret_cast<{elem}*>(smem + {off});\n",
                elem = t.elem,
                var = t.var,
                off = t.byte_offset
            ));
        }
        s
    }
}
