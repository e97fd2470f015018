//! Linear algebra behind one door. The rest of the code sees nalgebra matrices
//! ([`Matrix`], column-major `f64`); the heavy kernels run in faer through zero-copy views, on
//! one rayon pool ([`init_threads`], [`par`]).
//!
//! Record data is held transposed: a records dataset X ∈ R^{n×d} is stored as `Xᵀ` (d×n),
//! one record per column, which is exactly the row-major bytes of X read column-major. Kernels
//! take it as a borrowed [`Records`] view (of a [`Matrix`] or of a memory-mapped file), and
//! the [`stream`] kernels read it in passes over row blocks, so it may be larger than memory.
//!
//! This module never imports web, database or async crates.

pub mod clip;
pub mod clip_blocks;
mod clip_stats;
pub mod clip_tail;
pub mod eigen;
pub mod error;
pub mod gather;
pub mod kernels;
pub mod lanczos;
mod prefetch;
pub mod qr;
pub mod record_stats;
pub mod records;
pub mod sparse;
pub mod stream;
pub mod subspace;
pub mod svd;
pub mod tall;
pub mod threads;
mod view;

#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;

pub use clip_blocks::{ClipBlocks, ClipWork};
pub use error::LinalgError;
pub use kernels::{
    SymEig, ThinSvd, fix_signs, matmul, matmul_tn, sym_eig, thin_qr_q, thin_svd, try_sym_eig,
    try_sym_eigenvalues, try_thin_svd,
};
pub use record_stats::RecordStats;
pub use records::{Records, Residency};
pub use sparse::CsrView;
pub use stream::{
    StatsAccumulator, centred_gram_t, column_sums, gram_t, gram_t_times, projected_energy, stats_block_len,
};
pub use threads::{init_threads, par, par_for};

/// Dense column-major matrix of f64.
pub type Matrix = nalgebra::DMatrix<f64>;
/// Dense column vector of f64.
pub type Vector = nalgebra::DVector<f64>;
