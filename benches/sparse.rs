//! Sparse symmetric matrices: the CSR product against faer's, and seed 000's Table 1 on a
//! sparse matrix of the seed's shape.
//!
//! 1. **Product.** A·X at n = 100 000 with about 2·10⁶ stored entries (the lazy normalised
//!    adjacency of a planted-partition graph) and p = 20 and 64 columns: `CsrView::times` (the
//!    row-parallel loop the service uses) against faer's `sparse_dense_matmul` on the same
//!    arrays (A is symmetric, so its CSR arrays are its CSC arrays), best of 3.
//! 2. **Table 1** (Nicolas et al. 2024 §5.1): a generated user–item interaction graph of
//!    Amazon-book's shape (52 643 users, 91 599 items, about 3·10⁶ interactions; power-law
//!    activity and popularity, 10 planted communities), its normalised adjacency
//!    R̃ = D_u^-½·R·D_i^-½, and the top-p eigenvectors U_p of the item-item matrix R̃ᵀR̃ by
//!    block Lanczos (`linalg::lanczos`), applied as R̃ᵀ(R̃·X) and never formed. Prints μ₀, μ₁,
//!    Δᵃ = μ₀·√(p·log d) (existing) and Δᵇ = min(1, μ₁) (ours), and the runtime sensitivities
//!    of `algorithms::sensitivity` on X₀ and on U_p.
//!
//! Run with `cargo bench --bench sparse` (`-- product` or `-- table1` for one part); results
//! go to docs/performance-sparse.md.

use std::hint::black_box;
use std::time::Instant;

use faer::sparse::linalg::matmul::sparse_dense_matmul;
use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};
use faer::{Accum, MatMut, MatRef, Par};
use privpca::algorithms::sensitivity;
use privpca::dataset::Neighbours;
use privpca::linalg::lanczos::{LanczosOptions, top_eigenpairs};
use privpca::linalg::sparse::Csr;
use privpca::linalg::{self, Matrix};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

fn best_of_3<T>(mut op: impl FnMut() -> T) -> f64 {
    (0..3)
        .map(|_| {
            let start = Instant::now();
            black_box(op());
            start.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn gaussian(m: usize, n: usize, seed: u64) -> Matrix {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Matrix::from_fn(m, n, |_, _| StandardNormal.sample(&mut rng))
}

/// Gaussian n×c blocks from one seeded stream, for `top_eigenpairs`.
fn draws(n: usize, seed: u64) -> impl FnMut(usize) -> Matrix {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    move |c| Matrix::from_fn(n, c, |_, _| StandardNormal.sample(&mut rng))
}

/// (I + D^-½WD^-½)/2 of a planted-partition graph: n nodes in `groups` groups, about
/// n·(inside + across)/2 edges drawn as uniform pairs.
fn planted_partition(n: usize, groups: usize, inside: f64, across: f64, seed: u64) -> Csr {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let size = n / groups;
    let mut edges = Vec::new();
    for _ in 0..(n as f64 * inside / 2.0) as usize {
        let g = rng.random_range(0..groups);
        let (a, b) = (
            rng.random_range(0..size) * groups + g,
            rng.random_range(0..size) * groups + g,
        );
        edges.push((a.min(b), a.max(b)));
    }
    for _ in 0..(n as f64 * across / 2.0) as usize {
        let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
        if a % groups != b % groups {
            edges.push((a.min(b), a.max(b)));
        }
    }
    edges.retain(|(a, b)| a != b);
    edges.sort_unstable();
    edges.dedup();
    Csr::lazy_normalised_adjacency(n, &edges)
}

fn product() {
    // LANCZOS_DEGREE=d: the expected degree d (about n·(d + 1) stored entries), split 15 : 4
    // between inside and across as in scripts/bench_sparse.py; 19 by default.
    let degree: f64 = std::env::var("LANCZOS_DEGREE")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(19.0);
    let csr = planted_partition(100_000, 10, degree * 15.0 / 19.0, degree * 4.0 / 19.0, 1);
    let a = csr.view().expect("valid CSR");
    let col_ptr: Vec<usize> = csr.row_ptr.iter().map(|&v| v as usize).collect();
    let row_idx: Vec<usize> = csr.col_idx.iter().map(|&v| v as usize).collect();
    let symbolic = SymbolicSparseColMatRef::new_checked(csr.n, csr.n, &col_ptr, None, &row_idx);
    let faer_a = SparseColMatRef::new(symbolic, &csr.values);
    println!(
        "n = {}, nnz = {}, threads = {}",
        csr.n,
        a.nnz(),
        rayon::current_num_threads()
    );
    println!(
        "| p | CsrView::times (ms) | faer sparse_dense_matmul, Par::rayon (ms) | faer, Par::Seq (ms) | max abs diff |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for p in [20usize, 64] {
        let x = gaussian(csr.n, p, 2);
        let ours = best_of_3(|| a.times(&x));
        let faer_run = |par: Par| {
            let mut y = Matrix::zeros(csr.n, p);
            let dst = MatMut::from_column_major_slice_mut(y.as_mut_slice(), csr.n, p);
            let rhs = MatRef::from_column_major_slice(x.as_slice(), csr.n, p);
            sparse_dense_matmul(dst, Accum::Replace, faer_a, rhs, 1.0, par);
            y
        };
        let theirs = best_of_3(|| faer_run(faer::Par::rayon(0)));
        let sequential = best_of_3(|| faer_run(Par::Seq));
        let diff = (a.times(&x) - faer_run(Par::Seq)).abs().max();
        println!(
            "| {p} | {:.1} | {:.1} | {:.1} | {diff:.1e} |",
            ours * 1e3,
            theirs * 1e3,
            sequential * 1e3
        );
    }
}

/// Index drawn with probability proportional to `cumulative` increments.
fn draw(cumulative: &[f64], rng: &mut ChaCha8Rng) -> usize {
    let total = cumulative[cumulative.len() - 1];
    let target = rng.random::<f64>() * total;
    cumulative
        .partition_point(|&c| c <= target)
        .min(cumulative.len() - 1)
}

/// Zipf-like weights (rank + 1)^-s in a random order, as cumulative sums.
fn power_law(count: usize, s: f64, rng: &mut ChaCha8Rng) -> Vec<f64> {
    let mut weights: Vec<f64> = (0..count).map(|r| ((r + 1) as f64).powf(-s)).collect();
    for i in (1..count).rev() {
        weights.swap(i, rng.random_range(0..=i));
    }
    weights
        .iter()
        .scan(0.0, |sum, w| {
            *sum += w;
            Some(*sum)
        })
        .collect()
}

/// The users × items interaction graph as the symmetric (U + I) × (U + I) matrix
/// [[0, R̃], [R̃ᵀ, 0]] with R̃ = D_u^-½·R·D_i^-½; returns it and the number of interactions.
fn interactions(users: usize, items: usize, target: usize, groups: usize, seed: u64) -> (Csr, usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let activity = power_law(users, 0.6, &mut rng);
    // Items of each group, each group's popularity by the same power law.
    let group_items: Vec<Vec<usize>> = (0..groups)
        .map(|g| (g..items).step_by(groups).collect())
        .collect();
    let group_popularity: Vec<Vec<f64>> = group_items
        .iter()
        .map(|members| power_law(members.len(), 0.8, &mut rng))
        .collect();
    let popularity = power_law(items, 0.8, &mut rng);
    let mut pairs = Vec::with_capacity(target);
    for _ in 0..target {
        let u = draw(&activity, &mut rng);
        let item = if rng.random::<f64>() < 0.8 {
            let g = u % groups;
            group_items[g][draw(&group_popularity[g], &mut rng)]
        } else {
            draw(&popularity, &mut rng)
        };
        pairs.push((u as u32, item as u32));
    }
    pairs.sort_unstable();
    pairs.dedup();
    let mut du = vec![0.0_f64; users];
    let mut di = vec![0.0_f64; items];
    for &(u, i) in &pairs {
        du[u as usize] += 1.0;
        di[i as usize] += 1.0;
    }
    let mut triplets = Vec::with_capacity(2 * pairs.len());
    for &(u, i) in &pairs {
        let w = 1.0 / (du[u as usize] * di[i as usize]).sqrt();
        let j = users as u32 + i;
        triplets.push((u, j, w));
        triplets.push((j, u, w));
    }
    (Csr::from_triplets(users + items, triplets), pairs.len())
}

fn table1() {
    let (users, items) = (52_643, 91_599);
    let started = Instant::now();
    let (b, count) = interactions(users, items, 3_150_000, 10, 7);
    let b = b.view().expect("valid CSR");
    println!(
        "interaction graph: {users} users, {items} items, {count} interactions (generated in {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    // R̃ᵀ(R̃·X): B·[0; X] = [R̃X; 0], then B·[R̃X; 0] = [0; R̃ᵀR̃X].
    let apply = |x: &Matrix| {
        let mut z = Matrix::zeros(users + items, x.ncols());
        z.rows_mut(users, items).copy_from(x);
        let mut y = b.times(&z);
        y.rows_mut(users, items).fill(0.0);
        b.times(&y).rows(users, items).into_owned()
    };
    let neighbours = Neighbours::Entry { u: 1.0 };
    let log_d = (items as f64).ln();
    println!(
        "| p | μ₀ (top p) | μ₁ (top p) | Δᵃ = μ₀·√(p·log d) | Δᵇ = min(1, μ₁) | Δᵃ/Δᵇ | X₀: √p·max abs X | X₀: max row norm | U_p: √p·max abs | U_p: max row norm | Lanczos (s) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for p in [16usize, 64] {
        let started = Instant::now();
        let options = LanczosOptions::default();
        let mut draw = draws(items, 3);
        let found = top_eigenpairs::<()>(&apply, items, &mut draw, p, &options, &mut |_, _| Ok(()))
            .expect("converges");
        let seconds = started.elapsed().as_secs_f64();
        let u = found.vectors;
        let mu0 = u.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
        let mu1 = u
            .row_iter()
            .map(|r| r.iter().map(|v| v.abs()).sum::<f64>())
            .fold(0.0, f64::max);
        let delta_a = mu0 * (p as f64 * log_d).sqrt();
        let delta_b = mu1.min(1.0);
        let x0 = linalg::thin_qr_q(&gaussian(items, p, 11));
        println!(
            "| {p} | {mu0:.3} | {mu1:.2} | {delta_a:.2} = {:.2}·√p | {delta_b:.2} | {:.2} | {:.3} | {:.3} | {:.3} | {:.3} | {seconds:.1} |",
            delta_a / (p as f64).sqrt(),
            delta_a / delta_b,
            sensitivity::hardt_price(&neighbours, &x0),
            sensitivity::row_norm(&neighbours, &x0),
            sensitivity::hardt_price(&neighbours, &u),
            sensitivity::row_norm(&neighbours, &u),
        );
        println!(
            "  top eigenvalues of R̃ᵀR̃: {:?}",
            found
                .values
                .iter()
                .take(5)
                .map(|v| (v * 1e4).round() / 1e4)
                .collect::<Vec<_>>()
        );
    }
}

fn main() {
    linalg::init_threads(0);
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wants = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    if wants("product") {
        product();
    }
    if wants("table1") {
        table1();
    }
    if wants("lanczos") {
        lanczos();
    }
}

/// `exact`'s sparse path on the judged matrix (issue 24): the top 10 of the planted-partition
/// matrix by `top_eigenpairs`, for several block sizes and basis sizes; time, products A·X
/// (columns), restart cycles, and the largest residual ‖A·v − θ·v‖ of the result. (4, 48) is
/// the default before the multiplicity safeguard, (2, 24) the default with it; both run twice,
/// interleaved with the others, so their ratio comes from one run.
fn lanczos() {
    // LANCZOS_DEGREE=d: the expected degree d (about n·(d + 1) stored entries), split 15 : 4
    // between inside and across as in scripts/bench_sparse.py; 19 by default.
    let degree: f64 = std::env::var("LANCZOS_DEGREE")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(19.0);
    let csr = planted_partition(100_000, 10, degree * 15.0 / 19.0, degree * 4.0 / 19.0, 1);
    let a = csr.view().expect("valid CSR");
    let k = 10;
    println!("n = {}, nnz = {}, k = {k}", csr.n, a.nnz());
    println!(
        "| block b | basis m | tolerance | time (ms) | in A·X (ms) | products | columns applied | cycles | max residual |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (block, basis_columns, tolerance) in [
        (4, 48, 1e-7),
        (2, 24, 1e-7),
        (2, 32, 1e-7),
        (4, 32, 1e-7),
        (1, 24, 1e-7),
        (4, 48, 1e-7),
        (2, 24, 1e-7),
    ] {
        let options = LanczosOptions {
            tolerance,
            block,
            basis_columns,
            ..LanczosOptions::default()
        };
        let mut draw = draws(csr.n, 3);
        let (products, columns) = (std::cell::Cell::new(0usize), std::cell::Cell::new(0usize));
        let in_products = std::cell::Cell::new(0.0f64);
        let apply = |x: &Matrix| {
            products.set(products.get() + 1);
            columns.set(columns.get() + x.ncols());
            let began = Instant::now();
            let y = a.times(x);
            in_products.set(in_products.get() + began.elapsed().as_secs_f64());
            y
        };
        let mut cycles = 0u32;
        let mut progress = |done: u32, _: u32| -> Result<(), ()> {
            cycles = done;
            Ok(())
        };
        let began = Instant::now();
        let found = top_eigenpairs(&apply, csr.n, &mut draw, k, &options, &mut progress).expect("converges");
        let elapsed = began.elapsed().as_secs_f64();
        let av = a.times(&found.vectors);
        let residual = (0..k)
            .map(|i| (av.column(i) - found.vectors.column(i) * found.values[i]).norm())
            .fold(0.0, f64::max);
        println!(
            "| {block} | {basis_columns} | {tolerance:.0e} | {:.0} | {:.0} | {} | {} | {cycles} | {residual:.1e} |",
            elapsed * 1e3,
            in_products.get() * 1e3,
            products.get(),
            columns.get()
        );
    }
}
