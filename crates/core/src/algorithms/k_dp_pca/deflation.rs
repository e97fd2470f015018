//! The deflation framework of Düngler & Sanyal 2025, Alg. 1, shared by `k_dp_pca` (whose
//! 1-PCA step is Alg. 2, ModifiedDP-PCA) and `dp_oja` (whose 1-PCA step is Alg. 3, DP-Ojas).
//!
//! Alg. 1: m ← ⌊n/k⌋, P₀ ← I; for i = 1..k: u_i ← 1-PCA(part i of the records, P_{i−1}),
//! P_i ← P_{i−1} − u_i u_iᵀ (line 4); return U = [u_1, …, u_k].
//!
//! Before the records are cut into parts they are shuffled by a uniformly random permutation
//! (drawn from `env.rng()`, it does not depend on the data). Privacy: under `replace_one`, two
//! neighbouring datasets differ in one record; coupling the permutation, they differ in one
//! position of one part, inside one batch (or one update) of that part. Every other batch sees
//! identical records, so a 1-PCA step that is (ε, δ)-DP on its own batch makes the whole run
//! (ε, δ)-DP: parallel composition over disjoint records, which holds for adaptively chosen
//! mechanisms (each step's input ω, P depends on earlier releases only). The records left over
//! by ⌊n/k⌋ (and by ⌊m/B⌋ in Alg. 2) are not used.
//!
//! The 1-PCA steps keep their iterate in Im(P) (Alg. 2 lines 1 and 6, Alg. 3 lines 3 and 7),
//! so u_i is orthogonal to u_1, …, u_{i−1} and P_i stays an orthogonal projector.

use rand::RngCore;
use rand::seq::SliceRandom;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use crate::algorithms::{ConfigError, DataInput, RunError};
use crate::dataset::{DataContext, Kind, Relation};
use crate::linalg::{Matrix, Records, Vector, fix_signs, thin_qr_q};

/// The records, shuffled and cut into k disjoint parts of m = ⌊n/k⌋ (Alg. 1 line 1).
#[derive(Debug, Clone)]
pub struct Parts {
    order: Vec<usize>,
    len: usize,
}

impl Parts {
    /// A uniformly random permutation of 0..n (Fisher–Yates), cut into `k` ≥ 1 parts.
    pub fn shuffle(rng: &mut dyn RngCore, n: usize, k: usize) -> Self {
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(rng);
        Self {
            order,
            len: n / k.max(1),
        }
    }

    /// m = ⌊n/k⌋, the number of records in each part.
    pub fn part_len(&self) -> usize {
        self.len
    }

    /// The record indices of part `i` (0-based), in shuffled order.
    pub fn part(&self, i: usize) -> &[usize] {
        &self.order[i * self.len..(i + 1) * self.len]
    }
}

/// The records at `indices` (columns of `xt`), as a d×len matrix.
pub fn gather<'a>(xt: impl Into<Records<'a>>, indices: &[usize]) -> Matrix {
    let xt = xt.into();
    let mut out = Matrix::zeros(xt.nrows(), indices.len());
    for (c, &i) in indices.iter().enumerate() {
        out.column_mut(c).copy_from(&xt.column(i));
    }
    out
}

/// The projector P_i = I − U_i U_iᵀ of Alg. 1 (U_i = [u_1, …, u_i], orthonormal columns).
#[derive(Debug, Clone)]
pub struct Projector {
    u: Matrix,
}

impl Projector {
    /// P₀ = I on R^d.
    pub fn identity(d: usize) -> Self {
        Self {
            u: Matrix::zeros(d, 0),
        }
    }

    /// V ← P·V, column by column. P·V = V − U(UᵀV) is applied twice: one classical
    /// Gram–Schmidt pass loses orthogonality in proportion to the cancellation, a second pass
    /// restores it to working precision ("twice is enough", Giraud et al. 2005).
    pub fn apply(&self, v: &mut Matrix) {
        if self.u.ncols() == 0 {
            return;
        }
        for _ in 0..2 {
            let coefficients = self.u.transpose() * &*v;
            *v -= &self.u * coefficients;
        }
    }

    /// v ← P·v for one vector (see [`Projector::apply`]).
    pub fn apply_vector(&self, v: &mut Vector) {
        if self.u.ncols() == 0 {
            return;
        }
        for _ in 0..2 {
            let coefficients = self.u.transpose() * &*v;
            *v -= &self.u * coefficients;
        }
    }

    /// ω ← P·w/‖P·w‖ (Alg. 2 lines 1 and 6, Alg. 3 lines 3 and 7). Fails cleanly when P·w
    /// vanishes or overflows; w is a post-processing of DP releases, so the message reveals
    /// nothing beyond them.
    pub fn normalize(&self, mut w: Vector) -> Result<Vector, RunError> {
        self.apply_vector(&mut w);
        let norm = w.norm();
        if !(norm > 0.0 && norm.is_finite()) {
            return Err(RunError::Failed(
                "the iterate vanished or overflowed after projection; try a smaller learning rate".into(),
            ));
        }
        Ok(w / norm)
    }

    /// ω₀ = P·ω'/‖P·ω'‖ with ω' uniform on the unit sphere (Alg. 2 line 1, Alg. 3 line 3): a
    /// normalised standard Gaussian vector, drawn from `rng` (it does not depend on the data).
    pub fn start(&self, rng: &mut dyn RngCore) -> Result<Vector, RunError> {
        let d = self.u.nrows();
        let w = Vector::from_fn(d, |_, _| StandardNormal.sample(&mut *rng));
        self.normalize(w)
    }

    /// P_i ← P_{i−1} − u uᵀ (Alg. 1 line 4); `u` is a unit vector in Im(P_{i−1}).
    pub fn push(&mut self, u: &Vector) {
        let (d, i) = self.u.shape();
        self.u.resize_mut(d, i + 1, 0.0);
        self.u.set_column(i, u);
    }

    /// U = [u_1, …, u_k] (Alg. 1 line 6), re-orthonormalised by a thin QR (which keeps each
    /// column's direction up to sign, since the u_i are already orthonormal to working
    /// precision) and with the signs fixed by the rule of docs/design/algorithms.md.
    pub fn into_basis(self) -> Matrix {
        let mut q = thin_qr_q(&self.u);
        fix_signs(&mut q);
        q
    }
}

/// The learning rates η_t = 1/(offset + slope·t), t = 1, 2, … (the form of Düngler & Sanyal
/// App. G.1: η_t = 1/(20σλ_i + (λ_i − λ_{i+1})·t/ln n) for k-DP-PCA, η_j = 1/(1 + j) for
/// k-DP-Ojas).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LearningRate {
    /// o ≥ 0 (o + s > 0).
    #[schemars(range(min = 0))]
    pub offset: f64,
    /// s ≥ 0 (o + s > 0).
    #[schemars(range(min = 0))]
    pub slope: f64,
}

impl LearningRate {
    /// η_t for t ≥ 1.
    pub fn at(self, t: usize) -> f64 {
        1.0 / (self.offset + self.slope * t as f64)
    }

    /// Both finite and ≥ 0, and offset + slope > 0, so that every η_t (t ≥ 1) is finite and
    /// positive. `field` names the parameter in errors (e.g. "params.learning_rate").
    pub fn check(self, field: &str) -> Result<Self, ConfigError> {
        let ok = |v: f64| v >= 0.0 && v.is_finite();
        if !ok(self.offset) {
            return Err(ConfigError::invalid(
                format!("{field}.offset"),
                "must be a finite number ≥ 0",
            ));
        }
        if !ok(self.slope) {
            return Err(ConfigError::invalid(
                format!("{field}.slope"),
                "must be a finite number ≥ 0",
            ));
        }
        let positive = self.offset + self.slope > 0.0 && (self.offset + self.slope).is_finite();
        if !positive {
            return Err(ConfigError::invalid(
                field,
                "offset + slope must be > 0 (η_t = 1/(offset + slope·t) must be finite)",
            ));
        }
        Ok(self)
    }
}

/// The public n of a records dataset under `replace_one`, or a clear refusal saying why the
/// algorithm `name` needs one.
pub fn public_n(name: &str, ctx: &DataContext) -> Result<usize, ConfigError> {
    if ctx.kind() != Kind::Records {
        return Err(ConfigError::Unsupported(format!(
            "algorithm `{name}` works on individual records (A_i = x_i x_iᵀ, one per batch slot); a matrix dataset has none"
        )));
    }
    if ctx.relation() != Relation::ReplaceOne {
        return Err(ConfigError::Unsupported(format!(
            "algorithm `{name}` needs relation `replace_one`: its batches are positional, their number depends on n (which `add_remove` keeps private), and its privacy proof covers one record replaced by another"
        )));
    }
    match ctx.n {
        Some(n) if n >= 1 => Ok(n),
        _ => Err(ConfigError::Unsupported(format!(
            "algorithm `{name}` needs the dataset's public record count n"
        ))),
    }
}

/// The records matrix xt (d×n), checked against the public shape.
pub fn records<'a>(input: DataInput<'a>, ctx: &DataContext, n: usize) -> Result<Records<'a>, RunError> {
    match input {
        DataInput::Records { xt } if xt.nrows() == ctx.d && xt.ncols() == n => Ok(xt),
        _ => Err(RunError::Failed(
            "the data does not match the dataset's kind or shape".into(),
        )),
    }
}

/// P·x_i·(x_iᵀ·ω) for every column x_i of `batch` (ω ∈ Im(P), so P·A_i·P·ω = P·x_i·(x_iᵀω)):
/// the d×B matrix of per-record gradients of Alg. 2 lines 3–4 and Alg. 3 line 6.
pub fn gradients(batch: &Matrix, omega: &Vector, projector: &Projector) -> Matrix {
    let weights = batch.tr_mul(omega);
    let mut g = batch.clone();
    for (mut col, w) in g.column_iter_mut().zip(weights.iter()) {
        col *= *w;
    }
    projector.apply(&mut g);
    g
}

#[cfg(test)]
#[path = "deflation_tests.rs"]
mod tests;
