//! One launch over several disjoint boxes of points (a subdomain's boundary slabs): the
//! parameter and the first lines of a kernel that z-marches (`zmarch::Columns::Boxes`) as
//! [`Strategy::ZMarch`](super::Strategy::ZMarch) (each thread walks up to [`BOXES_PLANES`]
//! points along o with the o-neighbours in a register queue, one point per step), with blocks of
//! [`BOXES_THREADS`] threads numbered across the boxes. Each box shapes its blocks over (c, m)
//! to its own extent (a slab a few points thin along m gets blocks flat along it), so thin slabs
//! waste few threads, and a step's six slabs cost one launch instead of six.

use super::kernel::KernelParts;

/// Boxes one launch takes at most (the `2·D` slabs of a 3D range and two more).
pub const BOXES_MAX: usize = 8;

/// Threads per block of a boxes kernel (`2^BOXES_LOG2`).
pub const BOXES_THREADS: u32 = 1 << BOXES_LOG2;
const BOXES_LOG2: u32 = 8;

/// Points each thread of a boxes kernel walks along o.
pub const BOXES_PLANES: u32 = 16;

/// Threads along c a block gets at most where the box is wide along m (two warps' rows).
const WIDE_ROW_LOG2: u32 = 6;

/// The C struct the kernel takes by value; [`boxes_param`] writes its bytes.
const STRUCT: &str = "
struct StencilBoxes {
    long long origin[8];
    int n_c[8], n_m[8], n_o[8];
    int g_c[8], g_m[8];
    int l_c[8];
    int start[9];
    int count;
};
";

/// One box of a boxes launch: its first point (the element offset in the fields' storage) and
/// its points along the layout axes (c, m, o).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchBox {
    /// Element offset of the box's first point.
    pub origin: i64,
    /// Points along (c, m, o), each at least 1.
    pub len: [u32; 3],
}

/// The threads of a block along c of box `b` whose threads take `lanes` points each along c, as
/// a power of two (the rest go along m): as few along m as the box is thin there, else a row of
/// at most 64.
fn row_log2(b: &LaunchBox, lanes: u32) -> u32 {
    let log2_up = |n: u32| n.max(1).next_power_of_two().trailing_zeros();
    let threads_c = b.len[0].div_ceil(lanes.max(1));
    let l_m = log2_up(b.len[1]).min(BOXES_LOG2 - log2_up(threads_c).min(WIDE_ROW_LOG2));
    BOXES_LOG2 - l_m
}

/// Blocks of box `b` along (c, m, o).
fn box_grid(b: &LaunchBox, lanes: u32) -> [u64; 3] {
    let l_c = row_log2(b, lanes);
    let per_block = [(lanes.max(1) as u64) << l_c, 1u64 << (BOXES_LOG2 - l_c), BOXES_PLANES as u64];
    std::array::from_fn(|a| (b.len[a] as u64).div_ceil(per_block[a]))
}

/// The kernel parameter of a boxes launch over `boxes` (at most [`BOXES_MAX`], none empty) by a
/// kernel whose threads take `lanes` points each along c (its `points_per_block[0] / block[0]`),
/// as the bytes of the kernel's `StencilBoxes`, and the launch's blocks; `None` where there are
/// too many boxes or blocks for one launch.
pub fn boxes_param(boxes: &[LaunchBox], lanes: u32) -> Option<(Vec<u8>, u32)> {
    if boxes.is_empty() || boxes.len() > BOXES_MAX || boxes.iter().any(|b| b.len.contains(&0)) {
        return None;
    }
    let mut ints = [[0i32; BOXES_MAX]; 6];
    let mut start = [0i32; BOXES_MAX + 1];
    let mut total: u64 = 0;
    for (i, b) in boxes.iter().enumerate() {
        let g = box_grid(b, lanes);
        start[i] = i32::try_from(total).ok()?;
        total += g.iter().product::<u64>();
        let row = [b.len[0], b.len[1], b.len[2]].map(|n| n as i64);
        let vals = [row[0], row[1], row[2], g[0] as i64, g[1] as i64, row_log2(b, lanes) as i64];
        for (k, v) in vals.into_iter().enumerate() {
            ints[k][i] = i32::try_from(v).ok()?;
        }
    }
    let blocks = i32::try_from(total).ok()?;
    for s in start.iter_mut().skip(boxes.len()) {
        *s = blocks;
    }
    let mut bytes = Vec::with_capacity(8 * BOXES_MAX + 4 * (6 * BOXES_MAX + BOXES_MAX + 2));
    for i in 0..BOXES_MAX {
        bytes.extend(boxes.get(i).map_or(0, |b| b.origin).to_ne_bytes());
    }
    for v in ints.iter().flatten().chain(&start).chain(&[boxes.len() as i32]) {
        bytes.extend(v.to_ne_bytes());
    }
    // The struct's size is a multiple of its alignment (8).
    bytes.resize(bytes.len().next_multiple_of(8), 0);
    Some((bytes, blocks as u32))
}

/// The kernel's signature and its first lines: the box of this block, and the column (`c`,
/// `m`) and first point along o (`o0`) of this thread within it, as `origin`, `n_c`, `n_m`,
/// `n_o` (the box) for the z-marching body that follows.
pub(super) fn header(k: &KernelParts, threads: u32, planes: u32, lanes: i32) -> String {
    let mut s = k.header_with(threads, STRUCT, &["const StencilBoxes boxes"]);
    s.push_str(&format!(
        "    const int blk = (int)blockIdx.x;
    int b = 0;
    while (b + 1 < boxes.count && blk >= boxes.start[b + 1]) ++b;
    const int local = blk - boxes.start[b];
    const long long origin = boxes.origin[b];
    const int n_c = boxes.n_c[b], n_m = boxes.n_m[b], n_o = boxes.n_o[b];
    const int lc = boxes.l_c[b], t = (int)threadIdx.x;
    const int c = (((local % boxes.g_c[b]) << lc) + (t & ((1 << lc) - 1))) * {lanes};
    const int m = (((local / boxes.g_c[b]) % boxes.g_m[b]) << ({BOXES_LOG2} - lc)) + (t >> lc);
    const int o0 = (local / boxes.g_c[b] / boxes.g_m[b]) * {planes};
"
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_take_the_shape_of_each_box() {
        // Wide along c and m: rows of 64; 4 points thin along m: 4 rows of 64; 32 points wide
        // along c: rows of 32; one row: the whole block along c.
        let flat = LaunchBox { origin: 0, len: [100, 50, 1] };
        assert_eq!((row_log2(&flat, 1), box_grid(&flat, 1)), (6, [2, 13, 1]));
        let thin_m = LaunchBox { origin: 0, len: [100, 4, 50] };
        assert_eq!((row_log2(&thin_m, 1), box_grid(&thin_m, 1)), (6, [2, 1, 4]));
        let narrow = LaunchBox { origin: 0, len: [32, 50, 50] };
        assert_eq!((row_log2(&narrow, 1), box_grid(&narrow, 1)), (5, [1, 7, 4]));
        let one_row = LaunchBox { origin: 0, len: [3, 1, 9] };
        assert_eq!((row_log2(&one_row, 1), box_grid(&one_row, 1)), (8, [1, 1, 1]));
        // Four points per thread: 32 points are 8 threads along c, so 32 rows of 8.
        assert_eq!((row_log2(&narrow, 4), box_grid(&narrow, 4)), (3, [1, 2, 4]));
        assert_eq!((row_log2(&flat, 4), box_grid(&flat, 4)), (5, [1, 7, 1]));
    }

    #[test]
    fn the_parameter_numbers_blocks_across_boxes() {
        let boxes = [LaunchBox { origin: 7, len: [32, 50, 50] }, LaunchBox { origin: 1000, len: [100, 50, 1] }];
        let (bytes, blocks) = boxes_param(&boxes, 1).expect("fits");
        assert_eq!(bytes.len(), 8 * 8 + 4 * (6 * 8 + 9 + 1));
        assert_eq!(blocks, 28 + 26);
        let int = |at: usize| i32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap());
        let long = |at: usize| i64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap());
        assert_eq!((long(0), long(8)), (7, 1000));
        let l_c = 64 + 4 * 5 * 8;
        assert_eq!((int(l_c), int(l_c + 4)), (5, 6));
        let start = 64 + 4 * 6 * 8;
        assert_eq!((int(start), int(start + 4), int(start + 8), int(start + 32)), (0, 28, 54, 54));
        assert_eq!(int(start + 36), 2, "count");
        assert_eq!(boxes_param(&boxes, 4).expect("fits").1, 8 + 7);
        assert!(boxes_param(&[], 1).is_none());
        assert!(boxes_param(&[LaunchBox { origin: 0, len: [1, 0, 1] }], 1).is_none());
        assert!(boxes_param(&[boxes[0]; BOXES_MAX + 1], 1).is_none());
    }
}
