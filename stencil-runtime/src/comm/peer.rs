//! Ordering work between the streams of two GPU handles, and peer access between devices: what
//! the halo messages of [`crate::HaloExchange`] are copied with (`message.rs`). A copy is issued
//! on the destination's stream after an event of the source's stream, and the source's stream
//! waits for the copy before its later work, so neither side's kernels race with it.

use crate::error::LaunchError;
use crate::gpu::cuda::CudaError;
use crate::gpu::cuda::Gpu;
use cudarc::driver::sys::{self, CUevent_flags, CUresult};

/// Issues `copy` (work on `gpu`'s stream that reads memory of `src_gpu`) after the earlier work
/// of `src_gpu`'s stream, and makes `src_gpu`'s later work wait for it: neither side's kernels
/// race with the copy. Enables peer access between different devices first; `copy` is told
/// whether `gpu` reaches `src_gpu`'s memory directly (one device, or peer access on).
pub(super) fn ordered_between(
    gpu: &Gpu,
    src_gpu: &Gpu,
    copy: impl FnOnce(bool) -> Result<(), LaunchError>,
) -> Result<(), LaunchError> {
    let same_stream = src_gpu.home() == gpu.home() && src_gpu.cu_stream() == gpu.cu_stream();
    let direct = src_gpu.home() == gpu.home() || enable_peer_access(gpu, src_gpu)?;
    let no_timing = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);
    if !same_stream {
        let written = src_gpu.stream().record_event(no_timing).map_err(|e| src_gpu.fail("recording an event", e))?;
        gpu.stream().wait(&written).map_err(|e| gpu.fail("waiting for the source's stream", e))?;
    }
    copy(direct)?;
    if !same_stream {
        let copied = gpu.stream().record_event(no_timing).map_err(|e| gpu.fail("recording an event", e))?;
        src_gpu.stream().wait(&copied).map_err(|e| src_gpu.fail("waiting for a peer copy", e))?;
    }
    Ok(())
}

/// Lets `gpu`'s context read `peer`'s memory directly (NVLink or PCIe peer-to-peer), where the
/// devices can; returns whether it does. Where they cannot, peer copies still work through the
/// driver's staging.
pub(crate) fn enable_peer_access(gpu: &Gpu, peer: &Gpu) -> Result<bool, CudaError> {
    let mut done = gpu.inner.peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(&direct) = done.get(&peer.home()) {
        return Ok(direct);
    }
    // Handles of one device share its context: nothing to enable. Between devices, ask first
    // (enabling an unsupported pair is an error the driver logs).
    if gpu.ordinal() == peer.ordinal() {
        done.insert(peer.home(), true);
        return Ok(true);
    }
    done.insert(peer.home(), false);
    let mut can = 0;
    // SAFETY: writes one int; both ordinals are devices the driver reported.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, gpu.ordinal() as i32, peer.ordinal() as i32) }
        .result()
        .map_err(|e| gpu.fail("asking whether peer access is possible", e))?;
    if can == 0 {
        return Ok(false);
    }
    gpu.bind()?;
    // SAFETY: both contexts are alive; the call only changes access permissions.
    let r = unsafe { sys::cuCtxEnablePeerAccess(peer.inner.ctx.cu_ctx(), 0) };
    let direct = match r {
        CUresult::CUDA_SUCCESS | CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => true,
        CUresult::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED | CUresult::CUDA_ERROR_INVALID_DEVICE => false,
        other => return Err(gpu.fail("enabling peer access", cudarc::driver::DriverError(other))),
    };
    done.insert(peer.home(), direct);
    Ok(direct)
}
