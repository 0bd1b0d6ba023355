//! Non-temporal copies (a written row goes from a small buffer in L1 to memory without reading
//! the destination's cache lines first) and the denormal mode of a task.

use super::isa::Isa;

/// Copies `len` elements of `size` bytes from `src` to `dst` (not overlapping) with streaming
/// stores for the whole aligned cache lines, ordinary stores for the ragged ends.
///
/// # Safety
/// `src` and `dst` are valid for `len * size` bytes and do not overlap.
// Inlined into the nest's row loop: a call there makes the compiler reload the loop's vector
// constants after every row.
#[inline(always)]
pub unsafe fn stream_copy(dst: *mut u8, src: *const u8, bytes: usize, isa: Isa) {
    #[cfg(target_arch = "x86_64")]
    {
        let head = (dst as usize).next_multiple_of(64) - dst as usize;
        if bytes >= head + 64 {
            // SAFETY: caller's contract; the aligned middle and the ends stay inside `bytes`.
            unsafe {
                copy_short(dst, src, head);
                let body = (bytes - head) / 64 * 64;
                let (d, s) = (dst.add(head), src.add(head));
                match isa {
                    Isa::Avx512 => stream_avx512(d, s, body),
                    Isa::Avx2 => stream_avx2(d, s, body),
                    Isa::Baseline => stream_sse2(d, s, body),
                }
                copy_short(dst.add(head + body), src.add(head + body), bytes - head - body);
            }
            return;
        }
    }
    let _ = isa;
    // SAFETY: caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, bytes) }
}

/// Copies `n < 64` bytes (a row's ragged ends) with ordinary stores, in pieces of 32, 16, 8, 4, 2
/// and 1 bytes: no call, where a `memcpy` call per row made the compiler reload the row loop's
/// vector constants after it.
///
/// # Safety
/// `src` and `dst` are valid for `n` bytes and do not overlap; `n < 64`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn copy_short(dst: *mut u8, src: *const u8, n: usize) {
    debug_assert!(n < 64);
    let mut at = 0;
    for piece in [32, 16, 8, 4, 2, 1] {
        if n & piece != 0 {
            // SAFETY: `at + piece <= n` (the pieces are `n`'s bits, largest first); caller's contract.
            unsafe { std::ptr::copy_nonoverlapping(src.add(at), dst.add(at), piece) };
            at += piece;
        }
    }
}

/// The streaming copies of whole cache lines: four lines per iteration (a row of 256 f32 is 16
/// lines), then one at a time.
macro_rules! stream_lines {
    ($bytes:ident, $width:literal, $copy:expr) => {{
        let mut i = 0;
        while i + 256 <= $bytes {
            for k in (0..256).step_by($width) {
                $copy(i + k);
            }
            i += 256;
        }
        while i < $bytes {
            for k in (0..64).step_by($width) {
                $copy(i + k);
            }
            i += 64;
        }
    }};
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn stream_avx512(dst: *mut u8, src: *const u8, bytes: usize) {
    use std::arch::x86_64::*;
    // SAFETY: `dst + i` is 64-byte aligned and `i + 64 <= bytes` (a multiple of 64) inside the
    // caller's range.
    let copy =
        |i: usize| unsafe { _mm512_stream_si512(dst.add(i) as *mut _, _mm512_loadu_si512(src.add(i) as *const _)) };
    stream_lines!(bytes, 64, copy)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn stream_avx2(dst: *mut u8, src: *const u8, bytes: usize) {
    use std::arch::x86_64::*;
    // SAFETY: as above (32-byte alignment follows from 64).
    let copy =
        |i: usize| unsafe { _mm256_stream_si256(dst.add(i) as *mut _, _mm256_loadu_si256(src.add(i) as *const _)) };
    stream_lines!(bytes, 32, copy)
}

#[cfg(target_arch = "x86_64")]
unsafe fn stream_sse2(dst: *mut u8, src: *const u8, bytes: usize) {
    use std::arch::x86_64::*;
    // SAFETY: as above.
    let copy = |i: usize| unsafe { _mm_stream_si128(dst.add(i) as *mut _, _mm_loadu_si128(src.add(i) as *const _)) };
    stream_lines!(bytes, 16, copy)
}

/// Orders a task's streaming stores before whatever signals its end (they are weakly ordered).
pub fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    }
}

/// Sets FTZ and DAZ for the current thread while alive (if `on`), restoring the previous mode.
pub struct DenormalMode {
    #[cfg(target_arch = "x86_64")]
    saved: Option<u32>,
}

impl DenormalMode {
    /// Flushes denormals on this thread until dropped, if `on`.
    #[allow(deprecated)]
    pub fn flush(on: bool) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_getcsr, _mm_setcsr};
            if !on {
                return DenormalMode { saved: None };
            }
            // SAFETY: reading and writing MXCSR's flush bits changes only denormal handling.
            let saved = unsafe { _mm_getcsr() };
            unsafe { _mm_setcsr(saved | 0x8040) };
            DenormalMode { saved: Some(saved) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = on;
            DenormalMode {}
        }
    }
}

impl Drop for DenormalMode {
    #[allow(deprecated)]
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if let Some(saved) = self.saved {
            // SAFETY: restores the mode read in `flush`.
            unsafe { std::arch::x86_64::_mm_setcsr(saved) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_copy_every_offset_and_length() {
        let src: Vec<u8> = (0..1300u32).map(|v| (v * 7 + 3) as u8).collect();
        for isa in Isa::ALL.into_iter().filter(|i| i.supported()) {
            for off in [0usize, 1, 4, 31, 63] {
                for len in [0usize, 1, 63, 64, 65, 200, 500, 1100, 1217] {
                    let mut dst = vec![0xAAu8; 1300];
                    // SAFETY: both ranges are inside their vectors and distinct allocations.
                    unsafe { stream_copy(dst.as_mut_ptr().add(off), src.as_ptr(), len, isa) };
                    store_fence();
                    assert_eq!(&dst[off..off + len], &src[..len], "{isa:?} off {off} len {len}");
                    assert!(dst[..off].iter().chain(&dst[off + len..]).all(|&b| b == 0xAA));
                }
            }
        }
    }
}
