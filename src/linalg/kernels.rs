//! Kernels: Gram, products, thin QR, symmetric eigendecomposition, thin SVD.

use super::{Matrix, Vector};

/// `XᵀX` for records held transposed: given `xt` = Xᵀ (d×n), returns the d×d Gram matrix
/// Σ_i x_i x_iᵀ = xt·xtᵀ.
pub fn gram_t(xt: &Matrix) -> Matrix {
    xt * xt.transpose()
}

/// `a · b`.
pub fn matmul(a: &Matrix, b: &Matrix) -> Matrix {
    a * b
}

/// `aᵀ · b`.
pub fn matmul_tn(a: &Matrix, b: &Matrix) -> Matrix {
    a.transpose() * b
}

/// The Q factor of the thin QR decomposition of `y` (m×p, m ≥ p): m×p with orthonormal columns.
pub fn thin_qr_q(y: &Matrix) -> Matrix {
    y.clone().qr().q()
}

/// Symmetric eigendecomposition, eigenvalues in decreasing order, eigenvectors as columns in
/// the same order.
#[derive(Debug, Clone)]
pub struct SymEig {
    pub values: Vector,
    pub vectors: Matrix,
}

/// Eigendecomposition of the symmetric matrix `a` (only symmetric input is meaningful),
/// sorted by decreasing eigenvalue.
pub fn sym_eig(a: &Matrix) -> SymEig {
    let e = a.clone().symmetric_eigen();
    let mut order: Vec<usize> = (0..e.eigenvalues.len()).collect();
    order.sort_by(|&i, &j| e.eigenvalues[j].total_cmp(&e.eigenvalues[i]));
    let values = Vector::from_iterator(order.len(), order.iter().map(|&i| e.eigenvalues[i]));
    let vectors = Matrix::from_columns(&order.iter().map(|&i| e.eigenvectors.column(i)).collect::<Vec<_>>());
    SymEig { values, vectors }
}

/// Thin SVD `y = U diag(s) Vᵀ`, singular values in decreasing order.
#[derive(Debug, Clone)]
pub struct ThinSvd {
    /// m×r left singular vectors.
    pub u: Matrix,
    /// r singular values, decreasing.
    pub s: Vector,
    /// n×r right singular vectors (V, not Vᵀ).
    pub v: Matrix,
}

/// Thin SVD of `y` (m×n), r = min(m, n).
pub fn thin_svd(y: &Matrix) -> ThinSvd {
    let svd = y.clone().svd(true, true);
    let (u, vt) = (svd.u.unwrap_or_default(), svd.v_t.unwrap_or_default());
    let mut order: Vec<usize> = (0..svd.singular_values.len()).collect();
    order.sort_by(|&i, &j| svd.singular_values[j].total_cmp(&svd.singular_values[i]));
    ThinSvd {
        u: Matrix::from_columns(&order.iter().map(|&i| u.column(i)).collect::<Vec<_>>()),
        s: Vector::from_iterator(order.len(), order.iter().map(|&i| svd.singular_values[i])),
        v: Matrix::from_columns(&order.iter().map(|&i| vt.row(i).transpose()).collect::<Vec<_>>()),
    }
}

/// Deterministic sign rule of algorithms.md: flip each column so that its largest-magnitude
/// entry is positive (ties: the first such entry).
pub fn fix_signs(q: &mut Matrix) {
    for mut col in q.column_iter_mut() {
        let mut best = 0.0_f64;
        for &v in col.iter() {
            if v.abs() > best.abs() {
                best = v;
            }
        }
        if best < 0.0 {
            col.neg_mut();
        }
    }
}
