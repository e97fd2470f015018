//! Linear-algebra kernels: `privpca::linalg` (faer behind zero-copy views) against nalgebra, best
//! of 3, on the global rayon pool with one thread per core. Then the sequential/parallel
//! crossover that sets `linalg::threads::PARALLEL_MIN_WORK`.
//!
//! Run with `cargo bench --bench linalg`; the same-machine reference is
//! `python3 benches/reference_numpy.py`; results go to docs/performance-linalg.md.

use std::hint::black_box;
use std::time::{Duration, Instant};

use faer::{Mat, Par};
use privpca::linalg::{self, Matrix};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

/// Each timed run repeats the operation until it has taken at least this long.
const MIN_RUN: Duration = Duration::from_millis(200);

/// Seconds per call: the best over 3 runs of the mean over enough calls to fill [`MIN_RUN`].
fn best_of_3<T>(mut op: impl FnMut() -> T) -> f64 {
    let start = Instant::now();
    black_box(op());
    let once = start.elapsed().max(Duration::from_nanos(1));
    let calls = (MIN_RUN.as_secs_f64() / once.as_secs_f64()).ceil().max(1.0) as u32;
    (0..3)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..calls {
                black_box(op());
            }
            start.elapsed().as_secs_f64() / f64::from(calls)
        })
        .fold(f64::INFINITY, f64::min)
}

fn gaussian(m: usize, n: usize, seed: u64) -> Matrix {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Matrix::from_fn(m, n, |_, _| StandardNormal.sample(&mut rng))
}

fn row(name: &str, ours: f64, nalgebra: f64) {
    println!(
        "| {name:<38} | {:>10.2} | {:>10.2} | {:>7.1}× |",
        ours * 1e3,
        nalgebra * 1e3,
        nalgebra / ours
    );
}

fn kernels() {
    println!("| kernel                                 |  faer (ms) |  nalg (ms) | speed-up |");
    println!("|----------------------------------------|-----------:|-----------:|---------:|");

    let xt = gaussian(1000, 20_000, 1);
    row(
        "Gram XᵀX, n=20000 d=1000",
        best_of_3(|| linalg::gram_t(&xt)),
        best_of_3(|| &xt * xt.transpose()),
    );

    let a = linalg::gram_t(&xt);
    let v = gaussian(1000, 20, 2);
    row(
        "A·V formed A, d=1000 p=20",
        best_of_3(|| linalg::matmul(&a, &v)),
        best_of_3(|| &a * &v),
    );
    row(
        "Xᵀ(X·V) unformed, n=20000 d=1000 p=20",
        best_of_3(|| linalg::gram_t_times(&xt, &v)),
        best_of_3(|| &xt * xt.tr_mul(&v)),
    );
    drop(xt);

    let y = gaussian(1000, 20, 3);
    row(
        "thin QR Q, 1000×20",
        best_of_3(|| linalg::thin_qr_q(&y)),
        best_of_3(|| y.clone().qr().q()),
    );

    for (d, seed) in [(500, 4), (1500, 5)] {
        let g = gaussian(d, d, seed);
        let s = (&g + g.transpose()) * 0.5;
        row(
            &format!("eigh d={d}"),
            best_of_3(|| linalg::sym_eig(&s)),
            best_of_3(|| s.clone().symmetric_eigen()),
        );
    }

    let y = gaussian(500, 500, 6);
    row(
        "thin SVD 500×500",
        best_of_3(|| linalg::thin_svd(&y)),
        best_of_3(|| y.clone().svd(true, true)),
    );
}

/// Sequential against parallel faer on the shapes that decide the threshold.
fn crossover() {
    println!();
    println!("| faer op (work = multiply-adds)         | seq (µs)  | par (µs)  | par/seq |");
    println!("|----------------------------------------|----------:|----------:|--------:|");
    let par = linalg::par();
    let show = |name: String, seq: f64, par: f64| {
        println!(
            "| {name:<38} | {:>9.1} | {:>9.1} | {:>7.2} |",
            seq * 1e6,
            par * 1e6,
            par / seq
        );
    };
    for n in [32usize, 64, 96, 128, 192, 256] {
        let (a, b) = (
            Mat::<f64>::from_fn(n, n, |i, j| (i * j % 7) as f64),
            Mat::<f64>::identity(n, n),
        );
        let mut c = Mat::<f64>::zeros(n, n);
        let mut time = |p: Par| {
            best_of_3(|| {
                faer::linalg::matmul::matmul(c.as_mut(), faer::Accum::Replace, a.as_ref(), b.as_ref(), 1.0, p)
            })
        };
        let (s, p) = (time(Par::Seq), time(par));
        show(format!("matmul {n}³ (work {:.1e})", (n * n * n) as f64), s, p);
    }
    for (m, n) in [(1000usize, 20usize), (20000, 20), (20000, 100), (5000, 400)] {
        let y = Mat::<f64>::from_fn(m, n, |i, j| {
            ((i + 3 * j) % 11) as f64 - 5.0 + 1.0 / (1.0 + i as f64)
        });
        let time = |p: Par| {
            faer::set_global_parallelism(p);
            best_of_3(|| y.qr().compute_thin_Q())
        };
        let (s, p) = (time(Par::Seq), time(par));
        show(format!("thin QR {m}×{n} (work {:.1e})", (m * n * n) as f64), s, p);
    }
    for d in [128usize, 256, 512, 768, 1024] {
        let g = Mat::<f64>::from_fn(d, d, |i, j| {
            1.0 / (1.0 + i as f64 + j as f64) + ((i * j) % 5) as f64
        });
        let time = |p: Par| {
            faer::set_global_parallelism(p);
            best_of_3(|| g.self_adjoint_eigen(faer::Side::Lower))
        };
        let (s, p) = (time(Par::Seq), time(par));
        show(format!("eigh d={d} (work {:.1e})", (d * d * d) as f64), s, p);
        let time = |p: Par| {
            faer::set_global_parallelism(p);
            best_of_3(|| g.thin_svd())
        };
        let (s, p) = (time(Par::Seq), time(par));
        show(format!("SVD {d}×{d} (work {:.1e})", (d * d * d) as f64), s, p);
    }
}

fn main() {
    linalg::init_threads(0);
    println!(
        "privpca linalg bench: {} rayon threads, best of 3\n",
        rayon::current_num_threads()
    );
    kernels();
    crossover();
}
