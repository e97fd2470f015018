use super::*;
use crate::algorithms::testing::{gaussian, seeded};
use crate::linalg::subspace::orthonormality_error;

#[test]
fn parts_are_a_disjoint_permutation() {
    let parts = Parts::shuffle(&mut seeded(1), 103, 4);
    assert_eq!(parts.part_len(), 25);
    let mut seen: Vec<usize> = (0..4).flat_map(|i| parts.part(i).to_vec()).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 100, "parts overlap");
    assert!(seen.iter().all(|&i| i < 103));
    // A different seed gives a different order (the permutation is random).
    let other = Parts::shuffle(&mut seeded(2), 103, 4);
    assert_ne!(parts.part(0), other.part(0));
}

/// Each position receives each record with probability 1/n: a χ² check on 4 000 shuffles.
#[test]
fn permutation_is_uniform_on_each_position() {
    let (n, trials) = (8, 4000);
    let mut rng = seeded(3);
    let mut counts = vec![[0usize; 8]; n];
    for _ in 0..trials {
        let parts = Parts::shuffle(&mut rng, n, 1);
        for (pos, &rec) in parts.part(0).iter().enumerate() {
            counts[pos][rec] += 1;
        }
    }
    let expected = trials as f64 / n as f64;
    for row in &counts {
        let chi2: f64 = row
            .iter()
            .map(|&c| (c as f64 - expected).powi(2) / expected)
            .sum();
        // χ²_7: P(> 30) ≈ 1e-4.
        assert!(chi2 < 30.0, "{row:?}");
    }
}

#[test]
fn projector_deflates_and_normalizes() {
    let d = 12;
    let mut rng = seeded(4);
    let q = thin_qr_q(&gaussian(&mut rng, d, 3));
    let mut p = Projector::identity(d);
    let w0 = p.start(&mut rng).expect("start");
    assert!((w0.norm() - 1.0).abs() < 1e-14);
    for j in 0..3 {
        p.push(&q.column(j).into_owned());
    }
    let w = p.start(&mut rng).expect("start");
    assert!((w.norm() - 1.0).abs() < 1e-14);
    assert!(q.tr_mul(&w).amax() < 1e-14, "ω₀ ∉ Im(P)");
    let mut g = gaussian(&mut rng, d, 5);
    p.apply(&mut g);
    assert!(q.tr_mul(&g).amax() < 1e-13);
    let basis = p.into_basis();
    assert!(orthonormality_error(&basis) < 1e-14);
    for j in 0..3 {
        assert!((basis.column(j).dot(&q.column(j)).abs() - 1.0).abs() < 1e-13);
    }
    // A vector inside span(U) vanishes under P: a clean failure, not NaN.
    let mut p = Projector::identity(2);
    p.push(&Vector::from_column_slice(&[1.0, 0.0]));
    p.push(&Vector::from_column_slice(&[0.0, 1.0]));
    assert!(matches!(
        p.normalize(Vector::from_column_slice(&[3.0, 4.0])),
        Err(RunError::Failed(_))
    ));
}

#[test]
fn gradients_are_projected_rank_one_products() {
    let d = 6;
    let mut rng = seeded(5);
    let batch = gaussian(&mut rng, d, 4);
    let u = Vector::from_fn(d, |i, _| if i == 0 { 1.0 } else { 0.0 });
    let mut p = Projector::identity(d);
    p.push(&u);
    let omega = p.start(&mut rng).expect("start");
    let g = gradients(&batch, &omega, &p);
    let proj = Matrix::identity(d, d) - &u * u.transpose();
    for i in 0..4 {
        let a = batch.column(i) * batch.column(i).transpose();
        let want = &proj * a * &proj * &omega;
        assert!((g.column(i) - want).amax() < 1e-12);
    }
}

#[test]
fn learning_rate_is_checked_and_evaluated() {
    let lr = LearningRate {
        offset: 1.0,
        slope: 1.0,
    };
    assert_eq!(lr.at(1), 0.5);
    assert_eq!(lr.at(9), 0.1);
    assert!(lr.check("params.learning_rate").is_ok());
    for (bad, field) in [
        (
            LearningRate {
                offset: -1.0,
                slope: 1.0,
            },
            "params.learning_rate.offset",
        ),
        (
            LearningRate {
                offset: f64::NAN,
                slope: 1.0,
            },
            "params.learning_rate.offset",
        ),
        (
            LearningRate {
                offset: 1.0,
                slope: f64::INFINITY,
            },
            "params.learning_rate.slope",
        ),
        (
            LearningRate {
                offset: 0.0,
                slope: 0.0,
            },
            "params.learning_rate",
        ),
    ] {
        match bad.check("params.learning_rate") {
            Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}
