//! Several ranges as one launch ([`Executor::run_regions`](crate::Executor::run_regions) on a
//! GPU): a subdomain's boundary slabs, up to `BOXES_MAX` of them, run by the boxes kernel
//! (`stencil_codegen::printer::cuda::print_boxes_kernel`), z-marching with blocks shaped per box. A launch of six
//! thin slabs then costs one launch's overhead instead of six.
//!
//! `STENCIL_FUSE_SLABS=0` turns it off (each range its own launch, under the strategy the
//! launch would take alone); `1`, or unset, leaves it on.

use super::context::Gpu;
use super::kernel::{KernelChoice, LaunchKey};
use super::launch::{KernelArg, LaunchDims};
use crate::cpu::{Choice, SettingError};
use crate::error::LaunchError;
use crate::executor::Stencil;
use crate::field::Shape;
use crate::gpu::source::{geometry, layout_lengths, max_elem_bytes};
use crate::range::Loop;
use crate::stencil::args::ArgValue;
use stencil_codegen::printer::cuda::{boxes_param, LaunchBox, BOXES_MAX};

/// `STENCIL_FUSE_SLABS`: whether several ranges run as one launch.
static FUSE: Choice<bool> = Choice::new(
    "STENCIL_FUSE_SLABS",
    &[("1", true), ("0", false)],
    true,
    "0 (one launch per range) or 1 (several ranges as one launch, the default)",
);

/// Whether several ranges run as one launch: `STENCIL_FUSE_SLABS` (read once), an error for a
/// value other than `0` and `1`.
pub(crate) fn fuse_setting() -> Result<bool, SettingError> {
    FUSE.get()
}

/// Whether a stencil can run several ranges as one launch: not a reduction or a column sweep,
/// and no point functions (their values are kept on chip by the strategies of one range).
pub(crate) fn fusable(ir: &stencil_codegen::StencilIr) -> bool {
    !ir.reduces() && ir.sweep.is_none() && ir.point_fns.is_empty()
}

/// Whether no two of `regions` share a point.
fn disjoint<const D: usize>(regions: &[Loop<D>]) -> bool {
    regions.iter().enumerate().all(|(i, a)| regions[i + 1..].iter().all(|b| a.intersect(b).is_none()))
}

impl Gpu {
    /// Runs `S` over every range of `regions` (non-empty, each already checked by
    /// `check_launch` against the fields of `shape`) as one launch; `Ok(false)` (nothing done)
    /// where they cannot run as one: fusing is off, the stencil is not [`fusable`], there are
    /// fewer than two or too many ranges, or they overlap.
    pub(crate) fn launch_regions<S: Stencil<D>, const D: usize>(
        &self,
        regions: &[Loop<D>],
        shape: &Shape<D>,
        values: &[ArgValue<'_, D>],
    ) -> Result<bool, LaunchError> {
        let ir = S::source_ir();
        if !fuse_setting()? || !fusable(ir) || regions.len() < 2 || regions.len() > BOXES_MAX || !disjoint(regions) {
            return Ok(false);
        }
        let shape = *shape;
        let boxes: Vec<LaunchBox> = regions
            .iter()
            .map(|r| LaunchBox {
                origin: shape.offset(r.begin()) as i64,
                len: layout_lengths(&shape, r).map(|n| n as u32),
            })
            .collect();
        // Vector accesses as wide as every range allows.
        let elem = max_elem_bytes(ir);
        let lanes = regions.iter().map(|r| geometry(&shape, r, elem).lanes).min().unwrap_or(1);
        let geometry = stencil_codegen::printer::cuda::Geometry { lanes, ..geometry(&shape, &regions[0], elem) };
        let key = LaunchKey { stencil: S::IR.as_ptr() as usize, kernel: KernelChoice::Boxes, geometry };
        let prepared = self.prepared(ir, S::INFO.name, key)?;
        // The lanes the printed kernel takes (fewer where its queues would not fit).
        let lanes = prepared.points_per_block[0] / prepared.block[0].max(1);
        let Some((param, blocks)) = boxes_param(&boxes, lanes) else {
            return Ok(false);
        };
        let mut args: Vec<KernelArg> = Vec::with_capacity(values.len() + 1);
        args.extend(values.iter().map(|v| super::launch::scalar_or_field(v).expect("no reduction")));
        args.push(KernelArg::Bytes(&param));
        tracing::trace!(target: "stencil::launch", stencil = S::INFO.name, on = self.ordinal(), regions = regions.len(), "run as one launch");
        let dims = LaunchDims { grid: [blocks, 1, 1], block: prepared.block, shared_bytes: 0 };
        // SAFETY: the kernel was printed for this stencil and geometry: its parameters are the
        // stencil's (as `values` gives them) and the boxes; every range was checked against
        // every field with the stencil's reach (the caller's contract), and each thread touches only the points of its
        // box and their neighbours within the reach.
        unsafe { self.launch(&prepared.kernel, dims, &args)? };
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_takes_zero_and_one() {
        assert!(FUSE.parse(None).unwrap());
        assert!(FUSE.parse(Some("1")).unwrap());
        assert!(!FUSE.parse(Some("0")).unwrap());
        let e = FUSE.parse(Some("yes")).unwrap_err().to_string();
        assert!(e.contains("STENCIL_FUSE_SLABS") && e.contains("yes") && e.contains("0 (one launch"), "{e}");
    }

    #[test]
    fn overlapping_ranges_are_not_disjoint() {
        let a = Loop::<2>::from_parts([10, 10], [0, 0], [5, 0]);
        let b = Loop::<2>::from_parts([10, 10], [5, 0], [10, 10]);
        let c = Loop::<2>::from_parts([10, 10], [4, 4], [4, 4]);
        assert!(disjoint(&[a, b]));
        assert!(!disjoint(&[a, b, c]));
    }
}
