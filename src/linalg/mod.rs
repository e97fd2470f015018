//! Linear algebra behind one door. The rest of the code sees nalgebra matrices
//! ([`Matrix`], column-major `f64`); the heavy kernels run in faer through zero-copy views.
//!
//! Record data is held transposed: a records dataset X ∈ R^{n×d} is stored as `Xᵀ` (d×n),
//! one record per column, which is exactly the row-major bytes of X read column-major.
//!
//! This module never imports web, database or async crates.

pub mod kernels;
pub mod subspace;

pub use kernels::{SymEig, ThinSvd, fix_signs, gram_t, matmul, matmul_tn, sym_eig, thin_qr_q, thin_svd};

/// Dense column-major matrix of f64.
pub type Matrix = nalgebra::DMatrix<f64>;
/// Dense column vector of f64.
pub type Vector = nalgebra::DVector<f64>;
