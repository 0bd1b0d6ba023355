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
        let Some(ptr) = NonNull::new(raw as *mut T) else { return Err(AllocFailed { bytes: Some(layout.size()) }) };
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
        Ok(AlignedBuf { ptr, len })
    }
}

impl<T: Copy> Drop for AlignedBuf<T> {
    fn drop(&mut self) {
        let layout = Self::layout(self.len).expect("the layout it was allocated with");
        // SAFETY: allocated in `try_zeroed` with the same layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr() as *mut u8, layout) }
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
}
