use super::*;
use crate::algorithms::sensitivity::SensitivityMode;

fn config(multiplier: f64, iterations: u32) -> FederatedPowerConfig {
    FederatedPowerConfig {
        k: 2,
        p: 2,
        iterations,
        sensitivity: SensitivityMode::Auto,
        multiplier,
        sites: 3,
        threshold: 2,
        fraction_bits: 32,
        max_site_samples: 1000,
        dropouts: Vec::new(),
        secagg_plus: None,
        clip: None,
        clip_declined: None,
        center: None,
    }
}

/// What an honest coordinator states: the noise's cost, rounded up to ledger units.
fn stated(config: &FederatedPowerConfig) -> f64 {
    RhoUnits::checked_charge(cost_of(config.iterations, config.multiplier))
        .unwrap()
        .to_real()
}

#[test]
fn an_honest_study_passes_for_many_multipliers() {
    for (multiplier, iterations) in [(0.37, 1), (3.0, 10), (12.5, 7), (123.456, 40), (1e4, 3)] {
        let config = config(multiplier, iterations);
        assert_eq!(
            check_noise_covers(&config, Cost::ZERO, stated(&config)),
            Ok(()),
            "m {multiplier}"
        );
    }
}

#[test]
fn a_study_asking_for_less_noise_than_it_charges_is_refused() {
    let honest = config(3.0, 10);
    let charged = stated(&honest);
    // The same stated cost with 5 % less noise (or 10 % more rounds): under-noised.
    for cheat in [config(2.85, 10), config(3.0, 11)] {
        let err = check_noise_covers(&cheat, Cost::ZERO, charged).unwrap_err();
        assert!(err.contains("more than the ρ"), "{err}");
    }
    // Stating a smaller cost than the noise provides is refused the same way.
    assert!(check_noise_covers(&honest, Cost::ZERO, charged * 0.99).is_err());
}

#[test]
fn invalid_multipliers_are_refused() {
    for multiplier in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(
            check_noise_covers(&config(multiplier, 5), Cost::ZERO, 1.0).is_err(),
            "{multiplier}"
        );
    }
    assert!(check_noise_covers(&config(3.0, 0), Cost::ZERO, 1.0).is_err());
}

/// A 3-site `replace_one` study of d = 6 (β = 1) with the default clip, as a site sees it.
fn clip_study(rho: f64) -> (SiteStudyView, FederatedPowerConfig) {
    study_with(rho, None)
}

/// [`clip_study`] with a centre.
fn study_with(
    rho: f64,
    center: Option<crate::algorithms::centering::CenterRequest>,
) -> (SiteStudyView, FederatedPowerConfig) {
    use crate::algorithms::federated_power::{FederatedPowerParams, configure_study, study_context};
    use crate::algorithms::power_clip::ClipAsk;
    let neighbours = Neighbours::ReplaceOne {
        beta: 1.0,
        alpha: 6f64.sqrt(),
    };
    let ctx = study_context(6, neighbours);
    let target = crate::privacy::PrivacyTarget {
        public_default: false,
        rho,
        delta: None,
        epsilon: None,
    };
    let params: FederatedPowerParams = serde_json::from_value(serde_json::json!({"k": 2})).unwrap();
    let config = configure_study(&params, &ctx, &target, (3, 2), Some(ClipAsk::Auto), center).unwrap();
    let clip = config.clip.as_ref().expect("the default clip");
    let center_rho = config.center.as_ref().map_or(0.0, |c| c.cost().rho);
    let charged = RhoUnits::checked_charge(
        center_rho + clip.cost().rho + cost_of(config.iterations, config.multiplier),
    )
    .unwrap()
    .to_real();
    let view = SiteStudyView {
        study_id: uuid::Uuid::nil(),
        study_name: "s".into(),
        algorithm: "federated_power".into(),
        site_name: "a".into(),
        site_index: 1,
        n_sites: 3,
        threshold: 2,
        n_features: 6,
        relation: Relation::ReplaceOne,
        row_norm_bound: 1.0,
        row_l1_bound: 6f64.sqrt(),
        config: serde_json::to_value(&config).unwrap(),
        cost_rho: charged,
        cost_delta: 0.0,
        fraction_bits: config.fraction_bits,
        max_site_samples: config.max_site_samples,
        status: crate::federation::status::StudyStatus::Running,
        site_status: crate::federation::status::SiteStatus::Joined,
    };
    (view, config)
}

fn site_rows(n: usize) -> Matrix {
    let mut rng = crate::algorithms::testing::seeded(5);
    let xt = Matrix::from_fn(6, n, |i, _| {
        let z: f64 = rand_distr::Distribution::sample(&rand_distr::StandardNormal, &mut rng);
        z * if i == 0 { 0.3 } else { 0.05 }
    });
    clip_rows(&xt, 1.0)
}

#[test]
fn a_clip_study_is_accepted_with_its_rounds_and_shapes() {
    let (view, config) = clip_study(0.01);
    let comp = SiteComputation::from_view(&view).unwrap();
    assert_eq!(config.total_rounds(), 8 + config.iterations);
    assert!(comp.is_clip_round(8) && !comp.is_clip_round(9));
    assert_eq!(comp.shape_of(1), (1, 2));
    assert_eq!(comp.shape_of(9), (6, config.p));
}

#[test]
fn a_clip_study_that_hides_its_clip_cost_is_refused() {
    let (mut view, config) = clip_study(0.01);
    // The cost of the power rounds alone: the clip's 8 counts are not paid for.
    view.cost_rho = RhoUnits::checked_charge(cost_of(config.iterations, config.multiplier))
        .unwrap()
        .to_real();
    let err = SiteComputation::from_view(&view).unwrap_err();
    assert!(err.contains("more than the ρ"), "{err}");
    // Less noise on the counts than the cost states.
    let (mut view, mut config) = clip_study(0.01);
    config.clip.as_mut().unwrap().search.noise_sd *= 0.9;
    view.config = serde_json::to_value(&config).unwrap();
    assert!(SiteComputation::from_view(&view).is_err());
}

/// The configuration's S sizes the wrap bound and SecAgg+'s assumed corrupt sites, so a
/// configuration naming fewer sites than the study invited (a coordinator thinning the corrupt
/// fraction's bound) is refused.
#[test]
fn a_configuration_naming_other_sites_than_the_study_is_refused() {
    let (view, config) = clip_study(0.01);
    assert_eq!(config.sites, view.n_sites);
    for sites in [view.n_sites - 1, view.n_sites + 1] {
        let mut lying = config.clone();
        lying.sites = sites;
        let mut view = view.clone();
        view.config = serde_json::to_value(&lying).unwrap();
        let err = SiteComputation::from_view(&view).unwrap_err();
        assert!(err.contains("sites"), "{err}");
    }
}

#[test]
fn a_site_refuses_clip_steps_and_power_rounds_outside_the_clip() {
    let (view, config) = clip_study(0.01);
    let comp = SiteComputation::from_view(&view).unwrap();
    let mut rng = crate::algorithms::testing::seeded(1);
    let norms = vec![0.5; 10];
    assert_eq!(comp.clip_count(&norms, &[0.5, 0.5], &mut rng).unwrap().len(), 1);
    for step in [
        [2.0, 0.5],
        [1.0 / 512.0, 0.5],
        [0.5, 0.3],
        [0.5, 0.999],
        [f64::NAN, 0.5],
    ] {
        assert!(comp.clip_count(&norms, &step, &mut rng).is_err(), "{step:?}");
    }
    assert!(comp.clip_count(&norms, &[0.5], &mut rng).is_err());
    // A power round needs the clip norm, in range, and rows clipped at it.
    let x = crate::algorithms::power_noise::initial_iterate(&mut rng, 6, config.p);
    let rows = site_rows(40);
    assert!(comp.contribution(&rows, &x, None, &mut rng).is_err());
    assert!(comp.contribution(&rows, &x, Some(1.5), &mut rng).is_err());
    let unclipped = comp.contribution(&rows, &x, Some(0.01), &mut rng).unwrap_err();
    assert!(unclipped.contains("not clipped"), "{unclipped}");
    let clipped = clip_rows(&rows, 0.01);
    assert_eq!(
        comp.contribution(&clipped, &x, Some(0.01), &mut rng)
            .unwrap()
            .len(),
        6 * config.p
    );
    // In a study without a clip, a clip norm is refused.
    let plain = SiteComputation {
        config: FederatedPowerConfig { clip: None, ..config },
        ..comp
    };
    assert!(plain.contribution(&rows, &x, Some(0.5), &mut rng).is_err());
}

#[test]
fn the_coordinator_runs_the_search_then_the_power_rounds_at_its_c() {
    let (_, config) = clip_study(0.01);
    let clip = config.clip.clone().unwrap();
    let mut rng = crate::algorithms::testing::seeded(2);
    let mut state = PowerState::new(config.clone(), 6, Some(3_000), &mut rng).unwrap();
    let q = clip.quantile_for(Some(3_000), 2);
    let fixed = FixedPoint::new(clip.fraction_bits).unwrap();
    for step in 0..8 {
        assert!(state.in_clip());
        let RoundInput {
            rows,
            cols,
            values,
            clip_norm: c,
            ..
        } = state.task();
        assert_eq!((rows, cols, c), (1, 2, None));
        assert_eq!(values[1], q);
        // Every count positive: the bracket moves down each step.
        let _ = step;
        state.absorb(&[fixed.encode(10.0, 1e6).unwrap()], None).unwrap();
    }
    assert!(!state.in_clip());
    let c = state.clip_norm().unwrap();
    assert_eq!(c, 2f64.powf(-8.0 + 8.0 / 256.0));
    let task = state.task();
    assert_eq!((task.rows, task.cols, task.clip_norm), (6, config.p, Some(c)));
    let report = state.clip_report().unwrap();
    assert_eq!(report.steps.len(), 8);
    assert_eq!(report.clip_norm, Some(c));
    // A power round decodes at the bits of its c.
    let y = Matrix::from_fn(6, config.p, |i, j| if i == j { 1e-3 } else { 0.0 });
    let bits = FixedPoint::new(config.fraction_bits_at(Some(c))).unwrap();
    let words = bits.encode_all(y.as_slice(), 1.0).unwrap();
    state.absorb(&words, None).unwrap();
    assert!((state.last_release().unwrap() - &y).norm() < 1e-9);
    // Kept and restored mid-search, the state goes on from the same bracket.
    let mut fresh = PowerState::new(config.clone(), 6, Some(3_000), &mut rng).unwrap();
    fresh.absorb(&[fixed.encode(-3.0, 1e6).unwrap()], None).unwrap();
    let kept = fresh.clip_progress().cloned();
    let restored =
        PowerState::restore(config.clone(), 6, fresh.iterate().clone(), None, (kept, None)).unwrap();
    assert_eq!(restored.task(), fresh.task());
    assert!(PowerState::restore(config, 6, fresh.iterate().clone(), None, (None, None)).is_err());
}

#[test]
fn every_clip_norm_the_search_can_release_encodes_exactly() {
    for rho in [0.001, 0.01, 0.1, 1.0] {
        let (_, config) = clip_study(rho);
        let neighbours = Neighbours::ReplaceOne {
            beta: 1.0,
            alpha: 6f64.sqrt(),
        };
        assert!(config.clip_encodable(&neighbours, 6), "ρ = {rho}");
        // At the floor c = β/256 every bound is 2^-16 of β's: 16 more fraction bits.
        assert_eq!(
            config.fraction_bits_at(Some(1.0 / 256.0)),
            config.fraction_bits + 16
        );
        assert_eq!(config.fraction_bits_at(Some(1.0)), config.fraction_bits);
        assert_eq!(config.fraction_bits_at(None), config.fraction_bits);
    }
}

#[test]
fn an_auto_clip_that_cannot_be_encoded_is_declined_with_a_reason() {
    use crate::algorithms::federated_power::{FederatedPowerParams, configure_study, study_context};
    use crate::algorithms::power_clip::ClipAsk;
    let ctx = study_context(
        8,
        Neighbours::ReplaceOne {
            beta: 1.0,
            alpha: 8f64.sqrt(),
        },
    );
    let target = crate::privacy::PrivacyTarget {
        public_default: false,
        rho: 0.5,
        delta: None,
        epsilon: None,
    };
    let ask = |json| -> FederatedPowerParams { serde_json::from_value(json).unwrap() };
    // 64 sites of up to 10⁷ records: no encoding is exact at β/256 and wrap-free.
    let declined = configure_study(
        &ask(serde_json::json!({"k": 2})),
        &ctx,
        &target,
        (64, 43),
        Some(ClipAsk::Auto),
        None,
    )
    .unwrap();
    assert!(declined.clip.is_none());
    assert!(
        declined
            .clip_declined
            .as_deref()
            .is_some_and(|r| r.contains("max_site_samples")),
        "{declined:?}"
    );
    // Sized to the sites' real n, the same study clips.
    let params = ask(serde_json::json!({"k": 2, "max_site_samples": 1000}));
    let clipped = configure_study(&params, &ctx, &target, (64, 43), Some(ClipAsk::Auto), None).unwrap();
    assert!(clipped.clip.is_some() && clipped.clip_declined.is_none());
}

fn private_centre() -> Option<crate::algorithms::centering::CenterRequest> {
    Some(crate::algorithms::centering::CenterRequest::Private { share: 0.1 })
}

#[test]
fn a_centred_study_runs_the_centre_then_the_clip_then_the_power_rounds() {
    let (view, config) = study_with(0.01, private_centre());
    // Shares of the whole ρ: the centre's and the clip's 10 % each, the power rounds the rest.
    let center_rho = config.center.as_ref().unwrap().cost().rho;
    assert!((center_rho - 0.001).abs() < 1e-12, "{center_rho}");
    let power_rho = cost_of(config.iterations, config.multiplier);
    assert!(center_rho + config.clip.as_ref().unwrap().cost().rho + power_rho <= 0.01);
    assert!(power_rho > 0.0079, "{power_rho}");
    let comp = SiteComputation::from_view(&view).unwrap();
    assert_eq!(config.total_rounds(), 1 + 8 + config.iterations);
    assert_eq!(comp.kind_of(1), RoundKind::Center);
    assert_eq!((comp.shape_of(1), comp.round_len(1)), ((0, 0), 6));
    assert!(comp.is_clip_round(2) && comp.is_clip_round(9) && !comp.is_clip_round(10));
    assert_eq!((comp.shape_of(2), comp.round_len(2)), ((1, 2), 1));
    assert_eq!(comp.shape_of(10), (6, config.p));
    assert_eq!(config.lead_lengths(6), [vec![6], vec![1; 8]].concat());
    // The centre's round carries no centre; every later one carries d finite numbers.
    let mu = [0.1; 6];
    assert!(comp.check_round_center(1, None).is_ok());
    assert!(comp.check_round_center(1, Some(&mu)).is_err());
    assert!(comp.check_round_center(2, None).is_err());
    assert!(comp.check_round_center(2, Some(&mu)).is_ok());
    assert!(comp.check_round_center(10, Some(&mu[..5])).is_err());
    assert!(comp.check_round_center(10, Some(&[f64::NAN; 6])).is_err());
    // The site's release: d noisy values, from rows within β only.
    let mut rng = crate::algorithms::testing::seeded(3);
    assert_eq!(comp.center_release(&site_rows(30), &mut rng).unwrap().len(), 6);
    let outside = Matrix::from_element(6, 3, 1.0);
    assert!(comp.center_release(&outside, &mut rng).is_err());
    // A study without a centre refuses one.
    let (plain, _) = clip_study(0.01);
    let plain = SiteComputation::from_view(&plain).unwrap();
    assert!(plain.check_round_center(1, Some(&mu)).is_err());
    assert_eq!(plain.kind_of(1), RoundKind::ClipStep);
}

#[test]
fn a_study_that_hides_its_centre_cost_or_noise_is_refused() {
    let (mut view, config) = study_with(0.01, private_centre());
    // Charged for the clip and the power rounds only.
    view.cost_rho = RhoUnits::checked_charge(
        config.clip.as_ref().unwrap().cost().rho + cost_of(config.iterations, config.multiplier),
    )
    .unwrap()
    .to_real();
    let err = SiteComputation::from_view(&view).unwrap_err();
    assert!(err.contains("more than the ρ"), "{err}");
    // Less noise on the sum than the relation's sensitivity needs for the stated cost.
    let (mut view, mut config) = study_with(0.01, private_centre());
    if let crate::algorithms::centering::CenterConfig::Private { sum_sensitivity, .. } =
        &mut config.center.as_mut().unwrap().center
    {
        *sum_sensitivity = 1.0;
    }
    view.config = serde_json::to_value(&config).unwrap();
    assert!(SiteComputation::from_view(&view).is_err());
    // A given centre must match the one every round carries.
    let given = crate::algorithms::centering::CenterRequest::Given(vec![0.5; 6]);
    let (view, config) = study_with(0.01, Some(given));
    assert_eq!(config.center_rounds(), 0);
    let comp = SiteComputation::from_view(&view).unwrap();
    assert!(comp.check_round_center(1, Some(&[0.5; 6])).is_ok());
    assert!(comp.check_round_center(1, Some(&[0.4; 6])).is_err());
    assert!(comp.check_round_center(1, None).is_err());
}

#[test]
fn the_coordinator_releases_the_centre_first_and_carries_it_after() {
    let (_, config) = study_with(0.01, private_centre());
    let center = config.center.clone().unwrap();
    let mut rng = crate::algorithms::testing::seeded(2);
    let mut state = PowerState::new(config.clone(), 6, Some(3_000), &mut rng).unwrap();
    assert!(state.in_center() && !state.in_clip());
    let task = state.task();
    assert_eq!((task.rows, task.cols, task.center), (0, 0, None));
    // The unmasked sum over survivors holding 300 records: μ̂ = S̃/300.
    let fixed = FixedPoint::new(center.fraction_bits).unwrap();
    let sum: Vec<u64> = (0..6)
        .map(|i| fixed.encode(30.0 * i as f64, 1e6).unwrap())
        .collect();
    // replace_one divides by the survivors' public n: without it there is no centre.
    let mut other = PowerState::new(config.clone(), 6, Some(3_000), &mut rng).unwrap();
    assert!(other.absorb(&sum, None).is_err());
    state.absorb(&sum, Some(300)).unwrap();
    let mu: Vec<f64> = (0..6).map(|i| 0.1 * i as f64).collect();
    assert!(
        state
            .center()
            .unwrap()
            .iter()
            .zip(&mu)
            .all(|(a, b)| (a - b).abs() < 1e-9)
    );
    assert!(state.in_clip());
    let task = state.task();
    assert_eq!((task.rows, task.cols), (1, 2));
    assert_eq!(task.center.as_deref(), state.center());
    // Kept and restored, the state carries the same centre; a kept centre must fit the study.
    let kept = state.center().map(<[f64]>::to_vec);
    let restored = PowerState::restore(
        config.clone(),
        6,
        state.iterate().clone(),
        None,
        (state.clip_progress().cloned(), kept),
    )
    .unwrap();
    assert_eq!(restored.task(), state.task());
    let bad = Some(vec![f64::NAN; 6]);
    let clip = state.clip_progress().cloned();
    assert!(
        PowerState::restore(
            config.clone(),
            6,
            state.iterate().clone(),
            None,
            (clip.clone(), bad)
        )
        .is_err()
    );
    // Before the centre's round ends nothing is kept, and the state starts with it again.
    let fresh = PowerState::restore(config, 6, state.iterate().clone(), None, (clip, None)).unwrap();
    assert!(fresh.in_center());
}
