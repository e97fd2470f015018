//! A study rebuilt from its snapshot goes on where it stood: the same phase and tasks, and a
//! message already received, or for another phase, is still refused.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use uuid::Uuid;

use super::Snapshot;
use crate::algorithms::federated_power::FederatedPowerConfig;
use crate::algorithms::sensitivity::SensitivityMode;
use crate::federation::messages::{JoinRequest, SiteTask, UnmaskRequest};
use crate::federation::secagg::SiteSession;
use crate::federation::wire;
use crate::studies::live::{Effect, Live, LiveError, Protocol};

const D: usize = 3;
const P: usize = 2;

/// A small `federated_power` configuration (3 sites, t 2, 2 rounds, d 3).
pub(crate) fn config() -> FederatedPowerConfig {
    FederatedPowerConfig {
        k: 1,
        p: P,
        iterations: 2,
        sensitivity: SensitivityMode::Auto,
        multiplier: 1.0,
        sites: 3,
        threshold: 2,
        fraction_bits: 20,
        max_site_samples: 1_000,
        dropouts: Vec::new(),
    }
}

/// Through the snapshot's JSON, as the database keeps it.
fn reload(live: &Live, effects: &[Effect]) -> (Live, Vec<Effect>) {
    let snapshot = live.snapshot(effects).expect("a power study is kept");
    let text = serde_json::to_string(&snapshot).expect("serialise");
    let snapshot: Snapshot = serde_json::from_str(&text).expect("parse");
    Live::restore(live.study, snapshot, Instant::now(), Duration::from_secs(30)).expect("restore")
}

#[test]
fn a_restored_study_continues_and_refuses_repeats_and_wrong_phases() {
    let study = Uuid::new_v4();
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let names: BTreeMap<u32, String> = (1..=3).map(|i| (i, format!("s{i}"))).collect();
    let mut live = Live::new(
        study,
        Protocol::Power(config()),
        2,
        D,
        names,
        Instant::now() + Duration::from_secs(60),
        Duration::from_secs(30),
    );
    let mut sessions: BTreeMap<u32, SiteSession> = (1..=3)
        .map(|i| (i, SiteSession::new(study, i, 2, &mut rng)))
        .collect();
    for (&i, s) in &sessions {
        live.join(
            i,
            JoinRequest {
                n_samples: None,
                encryption_public_key: Some(s.encryption_public_key()),
                mask_public_keys: s.mask_public_keys(),
            },
        )
        .expect("join");
    }
    let effects = live.advance(Instant::now());
    assert!(matches!(effects.as_slice(), [Effect::Start { .. }]));
    let (mut live, again) = reload(&live, &effects);
    assert!(
        matches!(again.as_slice(), [Effect::Start { .. }]),
        "the last step's writes come back"
    );
    let SiteTask::ShareKeys { participants } = live.task(1) else {
        panic!("the key exchange goes on after a restore");
    };
    for (&i, s) in sessions.iter_mut() {
        let boxes = s.share_boxes(&participants, 2, &mut rng).expect("deal");
        live.shares(i, boxes).expect("shares");
    }
    let effects = live.advance(Instant::now());
    assert!(matches!(effects.as_slice(), [Effect::Charge { .. }]));
    let (mut live, _) = reload(&live, &effects);
    let SiteTask::Contribute {
        round: 1,
        roster,
        inbox,
        ..
    } = live.task(1)
    else {
        panic!("round 1 opens");
    };
    sessions
        .get_mut(&1)
        .unwrap()
        .receive_inbox(&inbox)
        .expect("inbox");
    let masked = sessions
        .get_mut(&1)
        .unwrap()
        .mask(1, &roster, &[0; D * P])
        .expect("mask");
    let masked = wire::words_to_b64(&masked);
    live.contribute(1, 1, &masked).expect("contribute");
    let (mut live, _) = reload(&live, &[]);
    assert!(matches!(
        live.contribute(1, 1, &masked),
        Err(LiveError::AlreadyReceived(_))
    ));
    assert!(matches!(
        live.contribute(2, 2, &masked),
        Err(LiveError::Conflict(_))
    ));
    let empty = UnmaskRequest {
        self_mask_shares: Vec::new(),
        mask_key_shares: Vec::new(),
    };
    assert!(
        matches!(live.unmask(1, 1, empty), Err(LiveError::Conflict(_))),
        "not unmasking yet"
    );
    assert!(
        matches!(live.task(1), SiteTask::Wait { .. }),
        "site 1 has answered round 1"
    );
    assert!(matches!(live.task(2), SiteTask::Contribute { round: 1, .. }));
}
