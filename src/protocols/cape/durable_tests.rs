//! A CAPE study rebuilt from its snapshot at every stage goes on where it stood: the same tasks
//! (the same aggregator seeds), the releases already received, repeats and wrong stages still
//! refused, the same sum; a damaged kept stage is refused.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use uuid::Uuid;

use crate::algorithms::cape_agn::{CapeAgnConfig, Model};
use crate::algorithms::cape_noise as cape;
use crate::federation::crypto::KeyPair;
use crate::federation::messages::{JoinRequest, SiteTask};
use crate::federation::wire;
use crate::linalg::Matrix;
use crate::protocols::cape::coordinator::{CapeKind, CapePlan};
use crate::store::StudyStatus;
use crate::studies::durable::Snapshot;
use crate::studies::live::{Effect, Live, LiveError, Protocol};

const D: usize = 3;

fn pca_plan() -> CapePlan {
    CapePlan {
        kind: CapeKind::Pca { k: 1 },
        pair_ratio: 1.0,
        stages: vec![1.0],
        rho: 0.5,
        clip: None,
        center: None,
    }
}

fn agn_plan() -> CapePlan {
    let mut plan = CapePlan {
        kind: CapeKind::Pca { k: 1 },
        pair_ratio: 1.0,
        stages: vec![1.0, 1.0],
        rho: 0.5,
        clip: None,
        center: None,
    };
    let stage1 = plan.stage_noise(1, 3, None).expect("stage 1");
    let stage2 = plan.stage_noise(2, 3, None).expect("stage 2");
    plan.kind = CapeKind::Agn(Box::new(agn_config(stage1, stage2)));
    plan
}

/// A 3-site `cape_agn` configuration (k 2, MOG with σ² = 0) with these stages' noise.
pub(crate) fn agn_config(stage1: cape::CapeNoise, stage2: cape::CapeNoise) -> CapeAgnConfig {
    CapeAgnConfig {
        k: 2,
        model: Model::Mog,
        sigma2: 0.0,
        sites: 3,
        shares: vec![1.0 / 3.0; 3],
        dropouts: Vec::new(),
        starts: 4,
        power_iterations: 20,
        pair_ratio: 1.0,
        stage1,
        stage2,
    }
}

/// Through the snapshot's JSON, as the database keeps it.
fn reload(live: &Live, effects: &[Effect]) -> (Live, Vec<Effect>) {
    let snapshot = live.snapshot(effects);
    let text = serde_json::to_string(&snapshot).expect("serialise");
    let snapshot: Snapshot = serde_json::from_str(&text).expect("parse");
    Live::restore(live.study, snapshot, Instant::now(), Duration::from_secs(30)).expect("restore")
}

/// Three joined sites, the roster fixed (stage 1 open), kept and reloaded at each step.
fn started(plan: CapePlan) -> Live {
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let stages = plan.stages.len();
    let names: BTreeMap<u32, String> = (1..=3).map(|i| (i, format!("s{i}"))).collect();
    let live = Live::new(
        Uuid::new_v4(),
        Protocol::Cape(plan),
        2,
        D,
        names,
        Instant::now() + Duration::from_secs(60),
        Duration::from_secs(30),
    );
    let (mut live, none) = reload(&live, &[]);
    assert!(none.is_empty());
    for i in 1..=3 {
        let keys = (0..stages)
            .map(|_| wire::encode(&KeyPair::generate(&mut rng).public()))
            .collect();
        live.join(
            i,
            JoinRequest {
                n_samples: None,
                encryption_public_key: None,
                mask_public_keys: keys,
                signing_public_key: Some(
                    crate::federation::transcript::SiteSigner::from_seed([9; 32]).public_key(),
                ),
                seed_commitment: None,
            },
        )
        .expect("join");
        live = reload(&live, &[]).0;
    }
    let effects = live.advance(Instant::now());
    let (live, again) = reload(&live, &effects);
    assert!(
        matches!(
            again.as_slice(),
            [Effect::Start { roster }, Effect::Charge { roster: charged, dropped }]
                if roster == &[1, 2, 3] && charged == &[1, 2, 3] && dropped.is_empty()
        ),
        "the step's store writes come back, once each: {again:?}"
    );
    live
}

/// Every site confirms `stage`'s transcript and the consistency round closes (the coordinator
/// checks the signatures' shape; the sites check each other's, `protocols/cape/consistency.rs`).
fn confirm_stage(live: &mut Live, stage: u32) {
    let signature = crate::federation::transcript::SiteSigner::from_seed([9; 32]).sign(b"stage");
    for site in 1..=3 {
        assert!(matches!(
            live.task(site),
            SiteTask::CapeRelease { confirm: true, .. }
        ));
        live.cape_confirm(site, stage, &signature).expect("confirmed");
    }
    assert!(matches!(
        live.cape_release(1, stage, "AAAA"),
        Err(LiveError::Conflict(_))
    ));
    let marker = live.marker();
    assert!(live.advance(Instant::now()).is_empty());
    assert_ne!(live.marker(), marker, "closing the round is a step that is kept");
}

/// A release of the task's length: a large multiple of the identity (packed) in stage 1, so
/// that the sum's top eigenvectors are well defined whatever the noise.
fn release(task: &SiteTask) -> String {
    let SiteTask::CapeRelease { stage, len, .. } = task else {
        panic!("a release is asked for: {task:?}");
    };
    let values = if *stage == 1 {
        let mut m = Matrix::identity(D, D) * 1e6;
        m[(0, 0)] = 3e6;
        m[(1, 1)] = 2e6;
        cape::pack_upper(&m)
    } else {
        vec![1e3; *len]
    };
    wire::f64s_to_b64(&values)
}

/// Each (site, stage, repeat) release is refused: as already received when `repeat`, as a
/// conflict (another stage) otherwise.
fn refused(live: &mut Live, values: &str, cases: &[(u32, u32, bool)]) {
    for &(site, stage, repeat) in cases {
        let refusal = live.cape_release(site, stage, values);
        let right = match &refusal {
            Err(LiveError::AlreadyReceived(_)) => repeat,
            Err(LiveError::Conflict(_)) => !repeat,
            _ => false,
        };
        assert!(right, "site {site}, stage {stage}: {refusal:?}");
    }
}

#[test]
fn a_cape_pca_study_resumed_mid_stage_sums_what_it_received() {
    let mut straight = started(pca_plan());
    confirm_stage(&mut straight, 1);
    let (mut resumed, _) = reload(&straight, &[]);
    for site in 1..=3 {
        assert_eq!(resumed.task(site), straight.task(site), "the same task and seed");
    }
    let values = release(&straight.task(1));
    straight.cape_release(1, 1, &values).expect("release");
    resumed.cape_release(1, 1, &values).expect("release");
    let (mut resumed, _) = reload(&resumed, &[]);
    refused(&mut resumed, &values, &[(1, 1, true), (2, 2, false)]);
    assert!(
        matches!(resumed.task(1), SiteTask::Wait { .. }),
        "site 1 has sent"
    );
    for site in 2..=3 {
        straight.cape_release(site, 1, &values).expect("release");
        resumed.cape_release(site, 1, &values).expect("release");
    }
    let now = Instant::now();
    let a = straight.advance(now);
    let b = resumed.advance(now);
    let basis = |effects: &[Effect]| match effects.last() {
        Some(Effect::Succeeded { output, .. }) => output.basis.clone(),
        other => panic!("the study succeeds: {other:?}"),
    };
    assert_eq!(basis(&a), basis(&b), "the same sum, bit for bit");
    let (finished, effects) = reload(&resumed, &b);
    assert!(
        matches!(
            finished.task(1),
            SiteTask::Finished {
                status: StudyStatus::Succeeded,
                ..
            }
        ),
        "the finished stage is kept"
    );
    assert!(
        matches!(effects.last(), Some(Effect::Succeeded { .. })),
        "the result is written again on resume"
    );
}

#[test]
fn a_cape_agn_study_survives_a_snapshot_at_every_stage() {
    let mut straight = started(agn_plan());
    confirm_stage(&mut straight, 1);
    let (mut resumed, _) = reload(&straight, &[]);
    let values = release(&straight.task(1));
    for site in 1..=3 {
        straight.cape_release(site, 1, &values).expect("release");
        resumed.cape_release(site, 1, &values).expect("release");
        resumed = reload(&resumed, &[]).0;
    }
    let now = Instant::now();
    let a = straight.advance(now);
    let b = resumed.advance(now);
    assert!(matches!(a.as_slice(), [Effect::Progress { done: 1 }]), "{a:?}");
    let input = |task: SiteTask| match task {
        SiteTask::CapeRelease {
            stage: 2,
            input,
            input_rows,
            input_cols,
            len,
            ..
        } => (input, input_rows, input_cols, len),
        other => panic!("stage 2 opens: {other:?}"),
    };
    let whitening = input(straight.task(1));
    assert_eq!(
        whitening,
        input(resumed.task(1)),
        "the same whitening from the same sum"
    );
    // Stage 2, resumed after the whitening and again after one release.
    let (mut resumed, again) = reload(&resumed, &b);
    assert!(matches!(again.as_slice(), [Effect::Progress { done: 1 }]));
    let task = resumed.task(2);
    assert_eq!(input(task.clone()), whitening, "the whitening is kept");
    confirm_stage(&mut resumed, 2);
    let (mut resumed, _) = reload(&resumed, &[]);
    let values = release(&task);
    resumed.cape_release(2, 2, &values).expect("release");
    let (mut resumed, _) = reload(&resumed, &[]);
    refused(
        &mut resumed,
        &values,
        &[(2, 2, true), (1, 1, true), (3, 3, false)],
    );
    for site in [1, 3] {
        resumed.cape_release(site, 2, &values).expect("release");
    }
    let effects = resumed.advance(Instant::now());
    let Some(Effect::Succeeded { report, .. }) = effects.last() else {
        panic!("the study succeeds: {effects:?}");
    };
    assert_eq!(
        report["stage1"]["survivors"],
        serde_json::json!([1, 2, 3]),
        "{report}"
    );
    assert_eq!(
        report["stage2"]["survivors"],
        serde_json::json!([1, 2, 3]),
        "{report}"
    );
}

#[test]
fn a_damaged_kept_stage_is_refused() {
    let live = started(pca_plan());
    let snapshot = live.snapshot(&[]);
    let text = serde_json::to_string(&snapshot).expect("serialise");
    let mut json: serde_json::Value = serde_json::from_str(&text).expect("json");
    let mut released = live;
    confirm_stage(&mut released, 1);
    let values = release(&released.task(1));
    released.cape_release(1, 1, &values).expect("release");
    let mut with_release: serde_json::Value = serde_json::to_value(released.snapshot(&[])).expect("json");
    with_release["stage"]["cape"]["len"] = serde_json::json!(7);
    json["stage"]["cape"]["noise"]["sites"] = serde_json::json!(2);
    let mut both = json.clone();
    both["cape"] = serde_json::Value::Null;
    for damaged in [json, with_release, both] {
        let snapshot: Snapshot = serde_json::from_value(damaged).expect("parse");
        assert!(
            Live::restore(Uuid::new_v4(), snapshot, Instant::now(), Duration::from_secs(30)).is_err(),
            "refused"
        );
    }
}

/// `cape_pca` with a private centre (under add_remove, so the noisy count divides) and no clip:
/// the centre's stage (d + 1 values), then the Gram stage, whose input is μ̂.
fn centred_plan() -> CapePlan {
    let neighbours = crate::dataset::Neighbours::AddRemove {
        beta: 1.0,
        alpha: 3f64.sqrt(),
    };
    CapePlan {
        kind: CapeKind::Pca { k: 1 },
        pair_ratio: 1.0,
        stages: vec![2f64.sqrt(), 1.0],
        rho: 0.5,
        clip: None,
        center: Some(super::super::coordinator::PlanCenter {
            share: 0.1,
            neighbours,
        }),
    }
}

#[test]
fn a_centred_cape_pca_study_keeps_its_centre_across_a_restart() {
    let mut live = started(centred_plan());
    let SiteTask::CapeRelease { len, input, .. } = live.task(1) else {
        panic!("stage 1 is open");
    };
    assert_eq!(
        (len, input),
        (D + 1, None),
        "the centre's stage: the sum and β·n, no input"
    );
    confirm_stage(&mut live, 1);
    let values = wire::f64s_to_b64(&[30.0, 0.0, -15.0, 300.0]);
    for site in 1..=3 {
        live.cape_release(site, 1, &values).expect("release");
    }
    let effects = live.advance(Instant::now());
    assert!(
        matches!(effects.as_slice(), [Effect::Progress { done: 1 }]),
        "{effects:?}"
    );
    let (mut resumed, _) = reload(&live, &effects);
    let SiteTask::CapeRelease {
        stage,
        len,
        input: Some(input),
        input_rows,
        input_cols,
        ..
    } = resumed.task(2)
    else {
        panic!("stage 2 carries μ̂");
    };
    assert_eq!((stage, len, input_rows, input_cols), (2, D * (D + 1) / 2, 1, D));
    let mu = wire::b64_to_f64s(&input, D).unwrap();
    assert!(mu.iter().all(|v| v.is_finite()), "{mu:?}");
    for site in 1..=3 {
        assert_eq!(
            resumed.task(site),
            live.task(site),
            "the same μ̂ after the restart"
        );
    }
    confirm_stage(&mut resumed, 2);
    let mut m = Matrix::identity(D, D) * 1e6;
    m[(0, 0)] = 3e6;
    let gram = wire::f64s_to_b64(&cape::pack_upper(&m));
    for site in 1..=3 {
        resumed.cape_release(site, 2, &gram).expect("release");
    }
    let effects = resumed.advance(Instant::now());
    let Some(Effect::Succeeded { report, .. }) = effects.last() else {
        panic!("the study succeeds: {effects:?}");
    };
    let reported: Vec<f64> = serde_json::from_value(report["center"].clone()).unwrap();
    assert_eq!(reported, mu, "the result reports the centre the sites used");
}

#[test]
fn a_stored_cape_snapshot_is_kept_again_unchanged() {
    let mut live = started(pca_plan());
    confirm_stage(&mut live, 1);
    let values = release(&live.task(1));
    live.cape_release(1, 1, &values).expect("release");
    crate::studies::durable::tests::a_stored_snapshot_is_kept_again_unchanged("cape-pca-stage-1", &live);
}
