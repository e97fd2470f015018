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
        center: None,
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

/// A `cape_pca` plan with a private centre and a clip, as a site reads it.
fn centred_plan(neighbours: &Neighbours) -> Plan {
    let clip =
        CapeClip::configure(crate::algorithms::power_clip::ClipAsk::Auto, 0.01, neighbours, 4).unwrap();
    Plan::Pca {
        pair_ratio: 1.0,
        clip: Some(clip),
        center: Some(CapeCenter::Private { share: 0.1 }),
    }
}

#[test]
fn a_centred_studys_stages_carry_what_the_plan_says() {
    let d = 4;
    let neighbours = Neighbours::ReplaceOne {
        beta: 1.0,
        alpha: 2.0,
    };
    let plan = centred_plan(&neighbours);
    assert_eq!(plan.stages(), 1 + 8 + 1);
    let b64 = |v: &[f64]| Some((wire::f64s_to_b64(v), 1, v.len()));
    let input = |stage, len, given| stage_input(&plan, (stage, d), (len, true), &neighbours, given);
    // Stage 1: the centre's, d values and no input.
    assert!(matches!(input(1, d, None), Ok(StageInput::CenterSum { len: 4 })));
    assert!(input(1, d + 1, None).is_err());
    assert!(input(1, d, b64(&[0.5, 0.5])).is_err());
    // A clip step: [c, q] then μ̂; without μ̂, or with a non-finite one, refused.
    let mu = [0.1, -0.2, 0.0, 0.3];
    let step = [[0.5, 0.5].as_slice(), &mu].concat();
    match input(2, 1, b64(&step)) {
        Ok(StageInput::Step { c, q, center }) => {
            assert_eq!((c, q, center.as_deref()), (0.5, 0.5, Some(mu.as_slice())));
        }
        other => panic!("a step: {}", other.is_ok()),
    }
    assert!(input(2, 1, b64(&[0.5, 0.5])).is_err());
    let bad = [[0.5, 0.5].as_slice(), &[f64::NAN, 0.0, 0.0, 0.0]].concat();
    assert!(input(2, 1, b64(&bad)).is_err());
    // The Gram stage: [c] then μ̂; its text (what the transcript hashes) covers μ̂.
    let gram = [[0.5].as_slice(), &mu].concat();
    let clipped = input(10, d * (d + 1) / 2, b64(&gram)).unwrap();
    assert_eq!(clipped.center(), Some(mu.as_slice()));
    let other = [[0.5].as_slice(), &[0.1, -0.2, 0.0, 0.4]].concat();
    let shifted = input(10, d * (d + 1) / 2, b64(&other)).unwrap();
    assert_ne!(clipped.text(), shifted.text());
    // Its sensitivities: 2β for the centre's sum, the Gram's at c.
    let sum = input(1, d, None).unwrap();
    assert_eq!(plan.sensitivity(&neighbours, d, 1, &sum), 2.0);
    // Under add_remove the centre's stage carries d + 1 values (the sum and β·n).
    let add_remove = Neighbours::AddRemove {
        beta: 1.0,
        alpha: 2.0,
    };
    let plan = centred_plan(&add_remove);
    assert!(matches!(
        stage_input(&plan, (1, d), (d + 1, true), &add_remove, None),
        Ok(StageInput::CenterSum { len: 5 })
    ));
}

#[test]
fn the_centres_share_comes_first_and_the_gram_stage_takes_the_rest() {
    let neighbours = Neighbours::ReplaceOne {
        beta: 1.0,
        alpha: 2.0,
    };
    let Plan::Pca { clip, .. } = centred_plan(&neighbours) else {
        panic!("a cape_pca plan")
    };
    let clip = clip.unwrap();
    let charged = 0.01;
    let shares: Vec<f64> = (1..=10)
        .map(|stage| stage_share(charged, 10, (Some(0.1), Some(&clip)), stage).unwrap())
        .collect();
    assert_eq!(shares[0], 0.001);
    assert!(shares[1..9].iter().all(|s| (s - 0.001 / 8.0).abs() < 1e-15));
    assert!(shares.iter().sum::<f64>() <= charged);
    assert!(shares[9] > 0.0079);
    // No clip: the centre's share, then the rest.
    let two: Vec<f64> = (1..=2)
        .map(|stage| stage_share(charged, 2, (Some(0.1), None), stage).unwrap())
        .collect();
    assert_eq!(two[0], 0.001);
    assert!(two[0] + two[1] <= charged && two[1] > 0.0089);
}

/// A configuration whose centre and clip shares together reach ρ is refused before anything
/// is released (found in the review of session 34: the centre and the eight steps went out at
/// shares summing to 1.98ρ, and only the Gram stage refused its share of at most 0).
#[test]
fn stage_shares_past_the_charge_are_refused_before_any_release() {
    let neighbours = Neighbours::ReplaceOne {
        beta: 1.0,
        alpha: 2.0,
    };
    let Plan::Pca { clip, .. } = centred_plan(&neighbours) else {
        panic!("a cape_pca plan")
    };
    let mut clip = clip.unwrap();
    let charged = 0.01;
    assert!(check_stage_shares(charged, 10, (Some(0.1), Some(&clip))).is_ok());
    assert!(check_stage_shares(charged, 2, (Some(0.1), None)).is_ok());
    assert!(check_stage_shares(charged, 1, (None, None)).is_ok());
    clip.share = 0.99;
    let err = check_stage_shares(charged, 10, (Some(0.99), Some(&clip))).unwrap_err();
    assert!(err.contains("stage 10"), "{err}");
    clip.share = 0.9;
    assert!(check_stage_shares(charged, 10, (Some(0.5), Some(&clip))).is_err());
    assert!(check_stage_shares(charged, 2, (Some(1.0), None)).is_err());
}

/// A `cape_agn` study's σ² below 0 would lower the third moment's Δ (2β³ + 2βσ²√(3D + 6))
/// below what one record moves it by (found in the review of session 34: at σ² = −0.1, D = 20,
/// add_remove, Δ fell from ≥ 1 to 0.188, stage 2 then cost 28× its share): the site refuses
/// it, and the sensitivity counts a σ² below 0 as 0.
#[test]
fn a_negative_sigma2_is_refused_and_never_lowers_the_third_moment_sensitivity() {
    use crate::algorithms::cape_agn::{Model, third_moment_sensitivity};
    let neighbours = Neighbours::AddRemove {
        beta: 1.0,
        alpha: 20f64.sqrt(),
    };
    assert!(third_moment_sensitivity(Model::Mog, -0.1, 20, &neighbours) >= 1.0);
    assert!(third_moment_sensitivity(Model::Mog, f64::NAN, 20, &neighbours) >= 1.0);
    let (mut view, plan) = study();
    let noise = plan.stage_noise(1, 3, None).expect("a stage's noise");
    let mut config = super::super::durable::tests::agn_config(noise, noise);
    view.algorithm = "cape_agn".into();
    view.config = serde_json::to_value(&config).unwrap();
    assert!(Plan::of(&view).is_ok(), "σ² = 0 is accepted");
    config.sigma2 = -0.1;
    view.config = serde_json::to_value(&config).unwrap();
    let err = Plan::of(&view).err().unwrap_or_default();
    assert!(err.contains("sigma2"), "{err}");
}

/// A site restarted after confirming stage 1 and before its first release keeps the roster it
/// had fixed (found in the review of session 34: a restart rebuilt the roster from kept
/// releases only, and the transcript signs indices only, so the coordinator could then show
/// the same indices with pair-noise and signing keys of its own and count its own
/// confirmations).
#[tokio::test]
async fn a_site_restarted_after_its_confirmation_keeps_its_fixed_roster() {
    use super::super::consistency::StageTranscript;
    let dir = tempfile::tempdir().unwrap();
    let store = crate::store::Store::open_ledger(&dir.path().join("ledger.db"))
        .await
        .unwrap();
    let (view, plan) = study();
    let session = crate::store::SiteSession {
        secret_seed: [3; 32],
        fingerprint: "f".into(),
    };
    store.start_site_session(view.study_id, &session).await.unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    let peer = |index: u32, rng: &mut ChaCha20Rng| CapePeer {
        index,
        name: format!("s{index}"),
        noise_public_keys: vec![wire::encode(&KeyPair::generate(rng).public())],
        signing_public_key: SiteSigner::from_seed([index as u8 + 40; 32]).public_key(),
    };
    let peers = vec![peer(2, &mut rng), peer(3, &mut rng)];
    let signer = SiteSigner::from_seed([1; 32]);
    let me = Member {
        index: view.site_index,
        name: view.site_name.clone(),
        keys: vec![
            wire::encode(&KeyPair::generate(&mut rng).public()),
            signer.public_key(),
        ],
    };
    let own = plan.stage_noise(1, 3, None).expect("the stage's noise");
    let transcript = StageTranscript::of(&view, 1, &peers, &own, None).unwrap();
    transcript.accept(&store, &view, 1, &signer).await.unwrap();
    // The restart: a fresh guard, rebuilt from the ledger.
    let mut guard = RosterGuard::new(None);
    assert!(resume(&store, &view, &mut guard, &me).await.unwrap().is_none());
    let forged = vec![peer(2, &mut rng), peer(3, &mut rng)];
    let err = observe_roster(&mut guard, &view, &forged, &me, 1).unwrap_err();
    assert!(format!("{err:?}").contains("roster"), "{err:?}");
    observe_roster(&mut guard, &view, &peers, &me, 1).expect("the roster it fixed");
}
