//! A hint to the processor to start loading memory the next few iterations will read: the
//! sparse product's scattered reads of rows of Xᵀ wait on memory (docs/performance-sparse.md,
//! session 25), and asking for row x_j: a few entries ahead overlaps those waits. Measured at
//! n = 100 000, p = 20: 52 → 27–32 ms per product at 3.9·10⁶ entries and 102 → 70–76 ms at
//! 7.8·10⁶ (a stand-alone loop, the same kernel).
//!
//! The one `unsafe` here: `_mm_prefetch` is an `unsafe fn`, but a prefetch is only a hint. It
//! never faults, changes no memory and no result, and the address it is given is inside a slice
//! the caller borrows, so nothing can go wrong whatever the slice holds.
#![allow(unsafe_code)]

/// Asks for the cache lines holding `values` (at most the first 256 bytes), to be read soon.
#[inline(always)]
pub fn prefetch(values: &[f64]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let bytes = std::mem::size_of_val(values).min(256);
        let start = values.as_ptr().cast::<i8>();
        let mut offset = 0;
        while offset < bytes {
            // SAFETY: a prefetch reads nothing architecturally and cannot fault; `start + offset`
            // lies inside `values` (offset < its size in bytes).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.add(offset)) };
            offset += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = values;
}
