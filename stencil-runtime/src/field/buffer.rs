//! A zero-initialised, over-aligned heap buffer: rows of a field start on cache-line (and, for
//! 16-byte vector access, vector) boundaries only if the allocation itself is aligned, which
//! `Vec<T>` does not promise.

use rayon::prelude::*;
use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Alignment of every buffer, in bytes: one GPU memory transaction, two CPU cache lines.
const BUFFER_ALIGN: usize = 128;
/// Buffers at least this large are aligned to a 2 MiB huge page and advised to use huge pages,
/// which cuts TLB misses on the large sweeps stencils make.
const HUGE_PAGE: usize = 2 << 20;

/// An aligned, zero-initialised buffer of `len` elements of a plain scalar type.
pub struct AlignedBuf<T: Copy> {
    ptr: NonNull<T>,
    len: usize,
    /// Bytes between the allocation's start and `ptr`.
    skew: usize,
}

// SAFETY: the buffer owns its elements like a `Vec<T>` does.
unsafe impl<T: Copy + Send> Send for AlignedBuf<T> {}
// SAFETY: shared access hands out `&[T]` only.
unsafe impl<T: Copy + Sync> Sync for AlignedBuf<T> {}

/// Bytes of memory available for new allocations, as Linux reports them (`MemAvailable`);
/// `None` elsewhere.
pub(crate) fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// An allocation that failed: the bytes asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocFailed {
    /// Bytes asked for (`None`: more than the address space holds).
    pub bytes: Option<usize>,
}

impl<T: Copy> AlignedBuf<T> {
    fn layout(len: usize) -> Option<Layout> {
        let bytes = len.checked_mul(std::mem::size_of::<T>())?.max(1);
        let bytes = if bytes >= HUGE_PAGE { bytes.checked_add(SKEW_SPAN)? } else { bytes };
        let align = if bytes >= HUGE_PAGE { HUGE_PAGE } else { BUFFER_ALIGN.max(std::mem::align_of::<T>()) };
        Layout::from_size_align(bytes, align).ok()
    }

    /// `len` zeroed elements, aborting the process if memory runs out (as `Vec` does). `T` must
    /// be a scalar for which all-zero bytes is a valid value (the field element types all are).
    pub fn zeroed(len: usize) -> Self {
        Self::try_zeroed(len).unwrap_or_else(|_| match Self::layout(len) {
            Some(layout) => alloc::handle_alloc_error(layout),
            None => panic!("a buffer of {len} elements exceeds the address space"),
        })
    }

    /// `len` zeroed elements, or the bytes that could not be had.
    ///
    /// A large buffer is zeroed by rayon's threads in page-sized chunks (first touch), so its
    /// pages are placed with the threads that sweep fields, not all with the allocating thread.
    pub fn try_zeroed(len: usize) -> Result<Self, AllocFailed> {
        let layout = Self::layout(len).ok_or(AllocFailed { bytes: None })?;
        let huge = layout.size() >= HUGE_PAGE;
        // The kernel may grant more than it has (overcommit) and then end the process when the
        // zeroing below touches the pages: refuse what is plainly not available.
        if huge && available_memory().is_some_and(|a| layout.size() as u64 > a) {
            return Err(AllocFailed { bytes: Some(layout.size()) });
        }
        // SAFETY: the layout has non-zero size.
        let raw = unsafe {
            if huge {
                alloc::alloc(layout)
            } else {
                alloc::alloc_zeroed(layout)
            }
        };
        if raw.is_null() {
            return Err(AllocFailed { bytes: Some(layout.size()) });
        }
        if huge {
            // SAFETY: advising the kernel about memory we own; failure is harmless.
            #[cfg(target_os = "linux")]
            unsafe {
                libc::madvise(raw as *mut libc::c_void, layout.size(), libc::MADV_HUGEPAGE)
            };
            crate::cpu::pool::ensure_pool();
            let at = raw as usize;
            (0..layout.size().div_ceil(HUGE_PAGE)).into_par_iter().for_each(|page| {
                let start = page * HUGE_PAGE;
                let n = HUGE_PAGE.min(layout.size() - start);
                // SAFETY: disjoint chunks of the allocation; all-zero bytes are valid for `T`.
                unsafe { std::ptr::write_bytes((at + start) as *mut u8, 0, n) };
            });
        }
        let skew = if huge { next_skew() } else { 0 };
        // SAFETY: non-null, and a large buffer's layout holds `SKEW_SPAN` bytes more than its
        // elements need (a small one has no skew).
        let ptr = unsafe { NonNull::new_unchecked(raw.add(skew) as *mut T) };
        Ok(AlignedBuf { ptr, len, skew })
    }
}

/// Large buffers start this many bytes apart within a 4 KiB page, allocation after allocation
/// (0, 256, 512, … and round again after 16), instead of all on the 2 MiB boundary: fields at
/// the same offset within a page put the same point of every field in the same L1 set and make
/// a load look like it depends on the last store to another field (4K aliasing). On a 16-core
/// Intel Xeon a 7-point sweep on one thread ran 1.8–2.1 times faster so; see design record 0041.
const SKEW_STEP: usize = 2 * BUFFER_ALIGN;
/// Bytes a large buffer may start after its allocation.
const SKEW_SPAN: usize = 4096;

/// The next large buffer's offset from its allocation's start.
fn next_skew() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    skew_of(N.fetch_add(1, Ordering::Relaxed))
}

/// The offset of the `n`-th large buffer.
fn skew_of(n: usize) -> usize {
    (n % (SKEW_SPAN / SKEW_STEP)) * SKEW_STEP
}

impl<T: Copy> Drop for AlignedBuf<T> {
    fn drop(&mut self) {
        let layout = Self::layout(self.len).expect("the layout it was allocated with");
        // SAFETY: allocated in `try_zeroed` with the same layout.
        unsafe { alloc::dealloc((self.ptr.as_ptr() as *mut u8).sub(self.skew), layout) }
    }
}

impl<T: Copy> Clone for AlignedBuf<T> {
    fn clone(&self) -> Self {
        let mut copy = Self::zeroed(self.len);
        copy.copy_from_slice(self);
        copy
    }
}

impl<T: Copy> Deref for AlignedBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised (zeroed or written) elements.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> DerefMut for AlignedBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_zeroed() {
        for len in [1usize, 3, 1000, (4 << 20) / 4 + 7] {
            let b = AlignedBuf::<f32>::zeroed(len);
            assert_eq!(b.as_ptr() as usize % BUFFER_ALIGN, 0);
            assert!(b.iter().all(|&v| v == 0.0));
            assert_eq!(b.len(), len);
        }
    }

    /// Large buffers start at 16 different offsets within a page, each aligned, and are whole:
    /// zeroed, writable to the last element, and freed from where they were allocated.
    #[test]
    fn large_buffers_start_at_different_offsets_within_a_page() {
        let offsets: Vec<usize> = (0..16).map(skew_of).collect();
        assert!(offsets.iter().all(|&o| o % BUFFER_ALIGN == 0 && o < SKEW_SPAN), "{offsets:?}");
        let mut distinct = offsets.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 16, "{offsets:?}");
        assert_eq!(skew_of(16), skew_of(0));
        for _ in 0..3 {
            let len = HUGE_PAGE / 4 + 1000;
            let mut b = AlignedBuf::<f32>::zeroed(len);
            assert_eq!(b.as_ptr() as usize % BUFFER_ALIGN, 0);
            assert!(b.skew < SKEW_SPAN);
            assert!(b.iter().all(|&v| v == 0.0));
            b[len - 1] = 1.0;
            let c = b.clone();
            assert_eq!(c[len - 1], 1.0);
        }
    }
}
