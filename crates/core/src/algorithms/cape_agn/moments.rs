//! The per-record moments of the two models and their sensitivities (module docs of
//! `cape_agn.rs`: the models, the table of Δ and why).

use super::config::Model;
use crate::algorithms::tensor_power::{self, packed_index, packed_len};
use crate::dataset::Neighbours;
use crate::linalg::{Matrix, Records, gram_t};

/// Δ of the packed M₂^s (module docs' table).
pub fn second_moment_sensitivity(model: Model, sigma2: f64, d: usize, neighbours: &Neighbours) -> f64 {
    let s4 = sigma2 * sigma2;
    let dd = d as f64;
    match (model, *neighbours) {
        (Model::Stm, Neighbours::ReplaceOne { .. }) => std::f64::consts::SQRT_2,
        (Model::Stm, _) => 1.0,
        (Model::Mog, Neighbours::ReplaceOne { beta, .. }) => std::f64::consts::SQRT_2 * beta * beta,
        (Model::Mog, Neighbours::AddRemove { beta, .. }) => {
            let b2 = beta * beta;
            (dd * s4).max(b2 * b2 - 2.0 * sigma2 * b2 + dd * s4).sqrt()
        }
        (Model::Mog, Neighbours::Entry { u }) => u,
    }
}

/// Δ of the packed M₃^s (module docs' table). A σ² ≤ 0 counts as 0, as in the statistic
/// itself ([`third_moment`] drops the correction then): a negative σ² must not lower Δ below
/// the β³ (add_remove) or 2β³ (replace_one) one record moves the uncorrected moment by.
pub fn third_moment_sensitivity(model: Model, sigma2: f64, d: usize, neighbours: &Neighbours) -> f64 {
    let corr = sigma2.max(0.0) * (3.0 * d as f64 + 6.0).sqrt();
    match (model, *neighbours) {
        (Model::Stm, Neighbours::ReplaceOne { .. }) => std::f64::consts::SQRT_2,
        (Model::Stm, _) => 1.0,
        (Model::Mog, Neighbours::ReplaceOne { beta, .. }) => 2.0 * beta.powi(3) + 2.0 * beta * corr,
        (Model::Mog, Neighbours::AddRemove { beta, .. }) => beta.powi(3) + beta * corr,
        (Model::Mog, Neighbours::Entry { u }) => u,
    }
}

/// The model's domain projection of records (module docs): identity for MOG; for STM, entries
/// rounded to integers ≥ 0 and rows of fewer than 3 words zeroed.
pub fn to_domain<'a>(xt: impl Into<Records<'a>>, model: Model) -> Matrix {
    let xt = xt.into();
    match model {
        Model::Mog => xt.to_matrix(),
        Model::Stm => {
            let mut c = xt.map(|v| if v.is_finite() { v.round().max(0.0) } else { 0.0 });
            for mut col in c.column_iter_mut() {
                if col.sum() < 3.0 {
                    col.fill(0.0);
                }
            }
            c
        }
    }
}

/// Σ_n m₂(x_n) over domain-projected records `xt` (d×n): the D×D sum-form second moment.
pub fn second_moment(xt: &Matrix, model: Model, sigma2: f64) -> Matrix {
    let d = xt.nrows();
    if xt.ncols() == 0 {
        return Matrix::zeros(d, d);
    }
    match model {
        Model::Mog => gram_t(xt) - Matrix::identity(d, d) * (sigma2 * xt.ncols() as f64),
        Model::Stm => {
            // (ccᵀ − diag c)/(L(L−1)) per document: scale columns by 1/sqrt(L(L−1)).
            let mut scaled = xt.clone();
            let mut diag = vec![0.0; d];
            for (mut col, orig) in scaled.column_iter_mut().zip(xt.column_iter()) {
                let l = orig.sum();
                if l < 3.0 {
                    col.fill(0.0);
                    continue;
                }
                let pairs = l * (l - 1.0);
                col /= pairs.sqrt();
                for (acc, c) in diag.iter_mut().zip(orig.iter()) {
                    *acc += c / pairs;
                }
            }
            let mut m = gram_t(&scaled);
            for (i, v) in diag.into_iter().enumerate() {
                m[(i, i)] -= v;
            }
            m
        }
    }
}

/// Adds coef·sym(u⊗u⊗v) = coef·(u⊗u⊗v + u⊗v⊗u + v⊗u⊗u) to a packed K-tensor.
fn add_sym_uuv(out: &mut [f64], k: usize, coef: f64, u: &[f64], v: &[f64]) {
    tensor_power::for_each_packed(k, |idx, a, b, c| {
        out[idx] += coef * (u[a] * u[b] * v[c] + u[a] * v[b] * u[c] + v[a] * u[b] * u[c]);
    });
}

/// Adds coef·u⊗u⊗u to a packed K-tensor.
fn add_cube(out: &mut [f64], k: usize, coef: f64, u: &[f64]) {
    tensor_power::for_each_packed(k, |idx, a, b, c| out[idx] += coef * u[a] * u[b] * u[c]);
}

/// Adds coef·sym(e_i⊗e_i⊗v) to a packed D-tensor: the only entries with index i at least twice,
/// 3v_i at (i, i, i), v_c at (i, i, c) for c > i and v_a at (a, i, i) for a < i.
fn add_sym_eev(out: &mut [f64], coef: f64, i: usize, v: &[f64]) {
    out[packed_index(i, i, i)] += 3.0 * coef * v[i];
    for (c, vc) in v.iter().enumerate().skip(i + 1) {
        out[packed_index(i, i, c)] += coef * vc;
    }
    for (a, va) in v.iter().enumerate().take(i) {
        out[packed_index(a, i, i)] += coef * va;
    }
}

/// Adds coef·x⊗x⊗x to a packed D-tensor, skipping zero entries of x (STM records are sparse).
fn add_cube_packed(out: &mut [f64], coef: f64, x: &[f64]) {
    for (k, xk) in x.iter().enumerate() {
        if *xk == 0.0 {
            continue;
        }
        for (j, xj) in x.iter().enumerate().take(k + 1) {
            if *xj == 0.0 {
                continue;
            }
            let cjk = coef * xj * xk;
            let start = packed_index(0, j, k);
            for (o, xi) in out[start..=start + j].iter_mut().zip(x) {
                *o += cjk * xi;
            }
        }
    }
}

/// Σ_n m₃(x_n) over domain-projected records `xt` (d×n): the packed D-dimensional third moment
/// M₃^s (module docs), C(D+2, 3) entries, O(N·D³/6) for dense records. It is what a site rounds
/// to the grid and releases in stage 2 before projecting ([`super::stage2_message`]).
pub fn third_moment(xt: &Matrix, model: Model, sigma2: f64) -> Vec<f64> {
    let d = xt.nrows();
    let mut out = vec![0.0; packed_len(d)];
    let mut sum = vec![0.0; d];
    for x in xt.column_iter() {
        let x: Vec<f64> = x.iter().copied().collect();
        match model {
            Model::Mog => {
                add_cube_packed(&mut out, 1.0, &x);
                for (acc, v) in sum.iter_mut().zip(&x) {
                    *acc += v;
                }
            }
            Model::Stm => {
                let l: f64 = x.iter().sum();
                if l < 3.0 {
                    continue;
                }
                let coef = 1.0 / (l * (l - 1.0) * (l - 2.0));
                add_cube_packed(&mut out, coef, &x);
                for (i, ci) in x.iter().enumerate() {
                    if *ci != 0.0 {
                        add_sym_eev(&mut out, -coef * ci, i, &x);
                        out[packed_index(i, i, i)] += 2.0 * coef * ci;
                    }
                }
            }
        }
    }
    if model == Model::Mog && sigma2 > 0.0 {
        // −σ²·Σ_d sym(e_d⊗e_d⊗Σ_n x_n).
        for i in 0..d {
            add_sym_eev(&mut out, -sigma2, i, &sum);
        }
    }
    out
}

/// Σ_n m₃(x_n)(W, W, W) over domain-projected records `xt` (d×n), packed K×K×K, computed from
/// the records directly (module docs): y = Wᵀx and the rows w_i of W replace x and e_i. With
/// W = I it is the D-dimensional packed M₃^s itself.
pub fn projected_third_moment(xt: &Matrix, model: Model, sigma2: f64, w: &Matrix) -> Vec<f64> {
    let (d, k) = w.shape();
    let mut out = vec![0.0; packed_len(k)];
    let rows: Vec<Vec<f64>> = (0..d).map(|i| w.row(i).iter().copied().collect()).collect();
    let mut y_sum = vec![0.0; k];
    for x in xt.column_iter() {
        let mut y = vec![0.0; k];
        for (i, xi) in x.iter().enumerate() {
            if *xi != 0.0 {
                for (acc, wi) in y.iter_mut().zip(&rows[i]) {
                    *acc += xi * wi;
                }
            }
        }
        match model {
            Model::Mog => {
                add_cube(&mut out, k, 1.0, &y);
                for (acc, v) in y_sum.iter_mut().zip(&y) {
                    *acc += v;
                }
            }
            Model::Stm => {
                let l = x.sum();
                if l < 3.0 {
                    continue;
                }
                let coef = 1.0 / (l * (l - 1.0) * (l - 2.0));
                add_cube(&mut out, k, coef, &y);
                for (i, ci) in x.iter().enumerate() {
                    if *ci != 0.0 {
                        add_sym_uuv(&mut out, k, -coef * ci, &rows[i], &y);
                        add_cube(&mut out, k, 2.0 * coef * ci, &rows[i]);
                    }
                }
            }
        }
    }
    if model == Model::Mog && sigma2 > 0.0 {
        // −σ²·Σ_d sym(w_d⊗w_d⊗ȳ) = −σ²·(ȳ_a G_bc + G_ac ȳ_b + G_ab ȳ_c), G = WᵀW.
        let g = w.transpose() * w;
        tensor_power::for_each_packed(k, |idx, a, b, c| {
            out[idx] -= sigma2 * (y_sum[a] * g[(b, c)] + y_sum[b] * g[(a, c)] + y_sum[c] * g[(a, b)]);
        });
    }
    out
}
