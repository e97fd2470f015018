use super::*;
use crate::algorithms::cape_pca::configure_for;
use crate::dataset::DataContext;
use crate::privacy::PrivacyTarget;
use crate::privacy::units::RhoUnits;
use crate::protocols::cape::coordinator::{CapeKind, CapePlan};

/// A cape_pca study's view as the coordinator makes it: d = 20, replace_one, β = 1, ρ =
/// 0.002, 3 sites of which 2 must join.
fn study() -> (SiteStudyView, CapePlan) {
    let neighbours = Neighbours::ReplaceOne {
        beta: 1.0,
        alpha: 20f64.sqrt(),
    };
    let ctx = DataContext {
        d: 20,
        n: None,
        neighbours,
        public: false,
        sparse: false,
    };
    let target = PrivacyTarget {
        public_default: false,
        rho: 0.002,
        delta: None,
        epsilon: None,
    };
    let config = configure_for(2, None, &ctx, &target, 3, "sites").unwrap();
    let charged = RhoUnits::charge(config.noise.cost()).to_real();
    let plan = CapePlan {
        kind: CapeKind::Pca { k: 2 },
        pair_ratio: config.pair_ratio,
        stages: vec![config.noise.sensitivity],
        rho: charged,
        clip: None,
    };
    let view = SiteStudyView {
        study_id: uuid::Uuid::nil(),
        study_name: "s".into(),
        algorithm: "cape_pca".into(),
        site_name: "a".into(),
        site_index: 1,
        n_sites: 3,
        threshold: 2,
        n_features: 20,
        relation: Relation::ReplaceOne,
        row_norm_bound: 1.0,
        row_l1_bound: 20f64.sqrt(),
        config: serde_json::to_value(&config).unwrap(),
        cost_rho: charged,
        cost_delta: 0.0,
        fraction_bits: 0,
        max_site_samples: 10,
        status: crate::store::StudyStatus::Running,
        site_status: crate::store::SiteStatus::Joined,
    };
    (view, plan)
}

fn derive(view: &SiteStudyView, offered: &CapeNoise, roster: usize) -> Result<CapeNoise, String> {
    let plan = Plan::of(view)?;
    let neighbours = study_neighbours(view.relation, view.row_norm_bound, view.row_l1_bound)?;
    let delta = plan.sensitivity(&neighbours, view.n_features, 1, &StageInput::Plain);
    derived_noise(
        view,
        delta,
        view.cost_rho / f64::from(plan.stages()),
        plan.pair_ratio(),
        roster,
        offered,
        210,
    )
}

#[test]
fn the_coordinators_honest_noise_is_what_the_site_derives() {
    let (view, plan) = study();
    for roster in [2usize, 3] {
        let offered = plan.stage_noise(1, roster as u32, None).unwrap();
        let own = derive(&view, &offered, roster).expect("honest offer accepted");
        assert_eq!(own, offered, "bit for bit");
        assert!(own.cost() <= view.cost_rho, "no slack");
    }
}

#[test]
fn lies_about_the_noise_or_the_roster_are_refused() {
    let (view, plan) = study();
    let honest = plan.stage_noise(1, 3, None).unwrap();
    // The audit's lie: grid and widening moved, the sds the old check read left honest.
    let grid_lie = CapeNoise {
        pooled_sd: honest.pooled_sd * 2f64.powi(40),
        sensitivity: honest.sensitivity * 2f64.powi(60),
        ..honest
    };
    assert!(derive(&view, &grid_lie, 3).is_err());
    // Calibrated for a Δ or a ρ other than the study's.
    let small_delta = CapeNoise::calibrate(honest.sensitivity / 2.0, view.cost_rho, 3, 1.0).unwrap();
    assert!(derive(&view, &small_delta, 3).is_err());
    let big_rho = CapeNoise::calibrate(honest.sensitivity, view.cost_rho * 1.01, 3, 1.0).unwrap();
    assert!(derive(&view, &big_rho, 3).is_err());
    let other_kappa = CapeNoise::calibrate(honest.sensitivity, view.cost_rho, 3, 4.0).unwrap();
    assert!(derive(&view, &other_kappa, 3).is_err());
    // A roster outside [threshold, n_sites], or a noise for another roster size.
    let two = plan.stage_noise(1, 2, None).unwrap();
    assert!(derive(&view, &two, 3).is_err());
    let one = CapeNoise { sites: 1, ..two };
    assert!(derive(&view, &one, 1).is_err());
    let four = plan.stage_noise(1, 4, None).unwrap();
    assert!(derive(&view, &four, 4).is_err());
    // A charge stated lower than the noise the coordinator calibrated: refused too.
    let mut cheaper = view.clone();
    cheaper.cost_rho = view.cost_rho * (1.0 - 1e-6);
    assert!(derive(&cheaper, &honest, 3).is_err());
}

#[test]
fn whether_a_site_takes_part_never_depends_on_a_private_n() {
    let (mut view, _) = study();
    assert!(
        check_count(&view, 0).is_err(),
        "replace_one: n is public and must be ≥ 1"
    );
    assert_eq!(record_rules(&view), (u64::MAX, None));
    view.relation = Relation::AddRemove;
    for n in [0, 1, 10, 11, 1 << 40] {
        assert!(check_count(&view, n).is_ok(), "n = {n}");
    }
    // No cap on n (the study's max_site_samples is 10 here), and an empty file is zero
    // records of the study's d.
    assert_eq!(record_rules(&view), (u64::MAX, Some(20)));
}

/// The stage's consistency round (issue 36): a site shown a smaller roster than its peers, and
/// so a noise calibrated for it, never finds a quorum for its transcript; an honest stage does.
#[test]
fn a_stage_confirmed_for_another_roster_is_refused() {
    let (view, plan) = study();
    let signers: Vec<crate::federation::transcript::SiteSigner> = (1..=3u8)
        .map(|i| crate::federation::transcript::SiteSigner::from_seed([i; 32]))
        .collect();
    let peer = |i: u32| CapePeer {
        index: i,
        name: format!("s{i}"),
        noise_public_keys: Vec::new(),
        signing_public_key: signers[i as usize - 1].public_key(),
    };
    let as_site = |i: u32| SiteStudyView {
        site_index: i,
        ..view.clone()
    };
    // What site i signs for a roster of `members`.
    let transcript_of = |i: u32, members: &[u32]| {
        let peers: Vec<CapePeer> = members.iter().copied().filter(|&m| m != i).map(peer).collect();
        let noise = plan.stage_noise(1, members.len() as u32, None).unwrap();
        let own = derive(&as_site(i), &noise, members.len()).unwrap();
        (
            StageTranscript::of(&as_site(i), 1, &peers, &own, None).unwrap(),
            peers,
        )
    };
    let confirmation = |i: u32, t: &StageTranscript| crate::federation::messages::SiteSignature {
        site: i,
        signature: signers[i as usize - 1].sign(&t.message),
    };
    let quorum = crate::federation::transcript::quorum(3, 0);
    // Honest: every site was shown {1, 2, 3}; each finds the others' confirmations.
    let all: Vec<(StageTranscript, Vec<CapePeer>)> = (1..=3).map(|i| transcript_of(i, &[1, 2, 3])).collect();
    let confirmations: Vec<_> = (1..=3).map(|i| confirmation(i, &all[i as usize - 1].0)).collect();
    for i in 1..=3u32 {
        let (t, peers) = &all[i as usize - 1];
        t.check_quorum(1, peers, (i, &signers[i as usize - 1]), &confirmations, quorum)
            .expect("an honest stage is confirmed");
    }
    // Site 1 is shown {1, 2} (its noise calibrated for two sites); 2 and 3 see {1, 2, 3}.
    let (lied, peers) = transcript_of(1, &[1, 2]);
    let relayed = vec![
        confirmation(1, &lied),
        confirmation(2, &all[1].0),
        confirmation(3, &all[2].0),
    ];
    let refused = lied
        .check_quorum(1, &peers, (1, &signers[0]), &relayed, quorum)
        .expect_err("no quorum for another roster");
    assert!(matches!(refused, Failure::Protocol(_)), "exit code 3: {refused}");
    // Nor do the others find one for theirs, with site 1's confirmation of its own view.
    assert!(
        all[1]
            .0
            .check_quorum(1, &all[1].1, (2, &signers[1]), &relayed[..2], quorum)
            .is_err(),
        "site 2 alone confirmed its transcript"
    );
}
