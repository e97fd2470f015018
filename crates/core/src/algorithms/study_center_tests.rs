use super::*;
use crate::algorithms::centering::DEFAULT_CENTER_SHARE;
use crate::algorithms::federated_power::study_context;
use crate::algorithms::testing::with_audited_env;

const D: usize = 5;
const RHO: f64 = 0.01;

fn replace_one() -> Neighbours {
    Neighbours::ReplaceOne {
        beta: 2.0,
        alpha: 2.0 * (D as f64).sqrt(),
    }
}

fn add_remove() -> Neighbours {
    Neighbours::AddRemove {
        beta: 2.0,
        alpha: 2.0 * (D as f64).sqrt(),
    }
}

fn private(neighbours: Neighbours, sites: u32, t: u32, n_max: u64) -> StudyCenter {
    let request = CenterRequest::Private {
        share: DEFAULT_CENTER_SHARE,
    };
    StudyCenter::configure(request, &study_context(D, neighbours), RHO, sites, t, n_max).unwrap()
}

/// A site's rows: `n` records of norm ≤ 2 around the offset (3, 0, …) clipped to β = 2.
fn rows(site: u32, n: usize) -> Matrix {
    Matrix::from_fn(D, n, |i, j| {
        let v = if i == 0 { 1.5 } else { 0.0 } + 0.1 * ((site as usize * 7 + j * 3 + i) % 5) as f64;
        v.min(0.8)
    })
}

#[test]
fn a_private_centre_costs_its_share_and_passes_its_own_check() {
    for neighbours in [replace_one(), add_remove()] {
        let center = private(neighbours, 4, 3, 100);
        let rho = center.cost().rho;
        assert!(
            rho <= DEFAULT_CENTER_SHARE * RHO && rho > 0.999 * DEFAULT_CENTER_SHARE * RHO,
            "{rho}"
        );
        assert_eq!(center.check(&neighbours, D, 4, 3, 100).unwrap(), center.cost());
        assert_eq!(center.rounds(), 1);
        let count = usize::from(matches!(neighbours, Neighbours::AddRemove { .. }));
        assert_eq!(center.len(D), D + count);
    }
}

#[test]
fn a_centre_that_does_not_match_its_study_is_refused() {
    let center = private(replace_one(), 4, 3, 100);
    // Calibrated for replace_one (Δ = 2β): an add_remove study needs the count too.
    assert!(center.check(&add_remove(), D, 4, 3, 100).is_err());
    // Another threshold, more sites or records than its encoding holds.
    assert!(center.check(&replace_one(), D, 4, 2, 100).is_err());
    assert!(center.check(&replace_one(), D, 4_000_000, 3, 100).is_err());
    assert!(center.check(&replace_one(), D, 4, 3, 1 << 40).is_err());
    // A smaller sensitivity than the relation's (less noise than claimed).
    let mut halved = center.clone();
    if let CenterConfig::Private { sum_sensitivity, .. } = &mut halved.center {
        *sum_sensitivity /= 2.0;
    }
    assert!(halved.check(&replace_one(), D, 4, 3, 100).is_err());
    // A noise that is not a positive number.
    for sd in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let mut bad = center.clone();
        if let CenterConfig::Private { noise_sd, .. } = &mut bad.center {
            *noise_sd = sd;
        }
        assert!(bad.check(&replace_one(), D, 4, 3, 100).is_err(), "{sd}");
    }
    // A given centre must hold d finite numbers.
    let given = |vector: Vec<f64>| StudyCenter {
        center: CenterConfig::Given { vector },
        threshold: 3,
        fraction_bits: 0,
    };
    assert_eq!(
        given(vec![0.5; D]).check(&replace_one(), D, 4, 3, 100),
        Ok(Cost::ZERO)
    );
    assert!(
        given(vec![0.5; D - 1])
            .check(&replace_one(), D, 4, 3, 100)
            .is_err()
    );
    assert!(
        given(vec![f64::NAN; D])
            .check(&replace_one(), D, 4, 3, 100)
            .is_err()
    );
}

#[test]
fn centres_are_checked_for_length_and_finiteness() {
    assert!(check_center(&[0.0; D], D).is_ok());
    assert!(check_center(&[0.0; 3], D).is_err());
    assert!(check_center(&[0.0, 1.0, f64::INFINITY, 0.0, 0.0], D).is_err());
}

#[test]
fn a_sites_release_is_its_projected_sum_plus_noise_of_the_site_sd() {
    let center = private(add_remove(), 4, 3, 10);
    let xt = rows(0, 40);
    let (words, audit) = with_audited_env(3, |env| center.site_release(&xt, 2.0, 10, env).unwrap());
    assert_eq!(words.len(), D + 1);
    let [sum, count] = audit.draws.as_slice() else {
        panic!("two draws")
    };
    assert_eq!((sum.label, count.label), (SUM_RELEASE, COUNT_RELEASE));
    let CenterConfig::Private {
        noise_sd,
        count_noise_sd: Some(count_sd),
        ..
    } = center.center
    else {
        panic!("a private centre")
    };
    assert!((sum.scale / (noise_sd / 3f64.sqrt()) - 1.0).abs() < 1e-4);
    assert!((count.scale / (count_sd / 3f64.sqrt()) - 1.0).abs() < 1e-4);
    // 40 records against n_max = 10: the sum is projected onto the ball of radius n_max·β = 20
    // and the count clamped to 10; what is encoded is those plus the recorded noise.
    let fixed = FixedPoint::new(center.fraction_bits).unwrap();
    let values = fixed.decode_all(&words);
    let raw: Vec<f64> = (0..D).map(|i| xt.row(i).sum()).collect();
    let norm = raw.iter().map(|v| v * v).sum::<f64>().sqrt();
    for i in 0..D {
        let expected = raw[i] * 20.0 / norm + sum.values[i];
        assert!(
            (values[i] - expected).abs() < 1e-6,
            "{i}: {} vs {expected}",
            values[i]
        );
    }
    assert!((values[D] - 10.0 - count.values[0]).abs() < 1e-6);
}

#[test]
fn the_centre_is_the_noisy_sum_over_the_survivors_n() {
    let center = private(replace_one(), 4, 2, 100);
    let fixed = FixedPoint::new(center.fraction_bits).unwrap();
    let sum: Vec<u64> = [30.0, -6.0, 0.0, 3.0, 60.0]
        .iter()
        .map(|v| fixed.encode(*v, 1e6).unwrap())
        .collect();
    let mu = center.decode(&sum, D, Some(60)).unwrap();
    let expected = [0.5, -0.1, 0.0, 0.05, 1.0];
    assert!(
        mu.iter().zip(expected).all(|(a, b)| (a - b).abs() < 1e-9),
        "{mu:?}"
    );
    assert!(center.decode(&sum, D, Some(0)).is_err());
    assert!(center.decode(&sum, D, None).is_err());
    assert!(center.decode(&sum[..3], D, Some(60)).is_err());
    // add_remove divides by the noisy count, at least 1.
    let center = private(add_remove(), 4, 2, 100);
    let fixed = FixedPoint::new(center.fraction_bits).unwrap();
    let sum: Vec<u64> = [4.0, 0.0, 0.0, 0.0, 2.0, -3.0]
        .iter()
        .map(|v| fixed.encode(*v, 1e6).unwrap())
        .collect();
    assert_eq!(
        center.decode(&sum, D, None).unwrap(),
        vec![4.0, 0.0, 0.0, 0.0, 2.0]
    );
}

/// The noise of t sites' encoded releases summed as secure aggregation sums them (wrapping
/// u64), decoded, by coordinate: the sum's d coordinates and (add_remove) the count, with σ
/// from the spec (2β/√(2ρ_c), or β/√ρ_c and 1/√ρ_c), not from the code.
fn quorum_noise(neighbours: Neighbours, factor: f64, runs: u64) -> Vec<(Vec<f64>, f64)> {
    let t = 3u32;
    let mut center = private(neighbours, 4, t, 1_000);
    if let CenterConfig::Private {
        noise_sd,
        count_noise_sd,
        ..
    } = &mut center.center
    {
        *noise_sd *= factor;
        if let Some(sd) = count_noise_sd {
            *sd *= factor;
        }
    }
    let rho_c = DEFAULT_CENTER_SHARE * RHO;
    let add_remove = matches!(neighbours, Neighbours::AddRemove { .. });
    let (sum_sd, count_sd) = if add_remove {
        (2.0 / rho_c.sqrt(), 1.0 / rho_c.sqrt())
    } else {
        (4.0 / (2.0 * rho_c).sqrt(), 0.0)
    };
    let sites: Vec<Matrix> = (0..t).map(|s| rows(s, 30 + 10 * s as usize)).collect();
    let truth: Vec<f64> = (0..D)
        .map(|i| sites.iter().map(|x| x.row(i).sum()).sum())
        .chain(add_remove.then_some(120.0))
        .collect();
    let fixed = FixedPoint::new(center.fraction_bits).unwrap();
    let mut noise = vec![Vec::new(); truth.len()];
    for run in 0..runs {
        let (sum, _) = with_audited_env(run, |env| {
            sites.iter().fold(vec![0u64; truth.len()], |acc, xt| {
                let words = center.site_release(xt, 2.0, 1_000, env).unwrap();
                acc.iter().zip(words).map(|(a, w)| a.wrapping_add(w)).collect()
            })
        });
        for (i, v) in fixed.decode_all(&sum).into_iter().enumerate() {
            noise[i].push(v - truth[i]);
        }
    }
    // The sum's coordinates share one sd: pooled, they make one sample.
    let count = noise.split_off(D);
    let mut groups = vec![(noise.concat(), sum_sd)];
    groups.extend(count.into_iter().map(|values| (values, count_sd)));
    groups
}

fn audit(neighbours: Neighbours, factor: f64) -> Result<(), String> {
    for (values, spec_sd) in quorum_noise(neighbours, factor, 2_500) {
        crate::privacy::testing::check_gaussian_scale(&values, spec_sd)?;
    }
    Ok(())
}

#[test]
fn a_quorums_encoded_sum_carries_the_calibrated_noise() {
    for neighbours in [replace_one(), add_remove()] {
        let result = audit(neighbours, 1.0);
        assert!(result.is_ok(), "{neighbours:?}: {result:?}");
    }
}

#[test]
fn an_under_noised_sum_fails_the_audit() {
    for neighbours in [replace_one(), add_remove()] {
        crate::algorithms::testing::assert_audit_catches_under_noise(|factor| audit(neighbours, factor), 0.9);
    }
}
