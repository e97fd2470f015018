//! One rayon pool for every kernel, and the rule that keeps small problems sequential.
//!
//! All kernels draw their threads from rayon's global pool, so concurrent jobs share the machine
//! instead of each spawning its own workers. [`init_threads`] sizes that pool; it must run at
//! start-up, before the first kernel (any rayon use builds the global pool with one thread per
//! logical core, after which the size can no longer change).

use std::sync::Once;

use faer::Par;

/// Work (multiply-adds) below which a product ([`super::matmul`], [`super::gram_t`],
/// [`super::gram_t_times`]) runs sequentially: under it, waking the pool costs more than the
/// second thread saves. Measured on the 2-core reference machine (docs/performance-linalg.md):
/// faer's square matmul in parallel takes 1.41× the sequential time at 96³ ≈ 0.9·10⁶, 0.92× at
/// 128³ ≈ 2.1·10⁶ and 0.60× at 192³.
pub const PRODUCT_MIN_WORK: usize = 1 << 21;

/// Work (≈ m·n·min(m, n) multiply-adds) below which thin QR and the symmetric eigendecomposition
/// run sequentially. Measured (docs/performance-linalg.md): eigh is 0.93× at d = 256 (1.7·10⁷)
/// and 0.82× at d = 512; QR 1.27× at 20000×20 (8·10⁶) and 0.68× at 20000×100 (2·10⁸).
pub const DECOMPOSITION_MIN_WORK: usize = 1 << 25;

/// Work below which the SVD runs sequentially: faer's parallel SVD only pays from about
/// 768×768 (0.95×; 1.07× at 512×512, 0.76× at 1024×1024).
pub const SVD_MIN_WORK: usize = 1 << 28;

static INIT: Once = Once::new();

/// Builds rayon's global pool with `n` worker threads (`0`: one per logical core).
///
/// Idempotent: only the first call has an effect, later calls (with any `n`) do nothing. If the
/// global pool already exists because rayon was used before this call, that pool is kept.
pub fn init_threads(n: usize) {
    INIT.call_once(|| {
        let built = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("linalg-{i}"))
            .build_global();
        // An error only means the global pool was built earlier; it stays in use.
        drop(built);
    });
}

/// Parallelism over the global pool with all of its threads (`Par::Seq` when it has one).
pub fn par() -> Par {
    match rayon::current_num_threads() {
        0 | 1 => Par::Seq,
        n => Par::rayon(n),
    }
}

/// [`par`] for a product doing `work` multiply-adds, or `Par::Seq` below [`PRODUCT_MIN_WORK`].
pub fn par_for(work: usize) -> Par {
    if work < PRODUCT_MIN_WORK { Par::Seq } else { par() }
}

/// [`par_for`] for a product that runs while another thread of ours keeps a core busy (an
/// upload's statistics beside its parse): the pool's threads less one, so that they do not
/// contend with that thread for the cores. On the 2-core reference machine the pool's two
/// threads beside an upload's parse spun at faer's barrier for a tenth of the upload's CPU
/// time; on one thread the upload took 0.8× the CPU with the object store beside it.
pub fn par_for_beside_a_busy_thread(work: usize) -> Par {
    if work < PRODUCT_MIN_WORK {
        return Par::Seq;
    }
    match rayon::current_num_threads() {
        0..=2 => Par::Seq,
        n => Par::rayon(n - 1),
    }
}

/// [`par`] for a thin QR or symmetric eigendecomposition of `work` multiply-adds, or `Par::Seq`
/// below [`DECOMPOSITION_MIN_WORK`].
pub(crate) fn par_for_decomposition(work: usize) -> Par {
    if work < DECOMPOSITION_MIN_WORK {
        Par::Seq
    } else {
        par()
    }
}

/// [`par`] for an SVD of `work` multiply-adds, or `Par::Seq` below [`SVD_MIN_WORK`].
pub(crate) fn par_for_svd(work: usize) -> Par {
    if work < SVD_MIN_WORK { Par::Seq } else { par() }
}

/// `a·b·c` without overflow (saturates), for work estimates.
pub(crate) fn work(a: usize, b: usize, c: usize) -> usize {
    a.saturating_mul(b).saturating_mul(c)
}

#[cfg(test)]
#[path = "threads_tests.rs"]
mod tests;
