//! A study rebuilt from its snapshot goes on where it stood: the same phase and tasks, and a
//! message already received, or for another phase, is still refused.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use uuid::Uuid;

use super::{Journaled, Snapshot, StageSnapshot, replay};
use crate::algorithms::federated_power::FederatedPowerConfig;
use crate::algorithms::sensitivity::SensitivityMode;
use crate::federation::messages::{JoinRequest, SiteTask, UnmaskRequest};
use crate::federation::secagg::SiteSession;
use crate::federation::transcript::{RoundView, SiteSigner, confirmation_message};
use crate::federation::wire;
use crate::protocols::power::durable::KeptValues;
use crate::studies::live::{Effect, Live, LiveError, Protocol, Stage};

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
        secagg_plus: None,
        clip: None,
        clip_declined: None,
        center: None,
    }
}

/// Through the snapshot's JSON, as the database keeps it.
fn reload(live: &Live, effects: &[Effect]) -> (Live, Vec<Effect>) {
    let snapshot = live.snapshot(effects);
    let text = serde_json::to_string(&snapshot).expect("serialise");
    let snapshot: Snapshot = serde_json::from_str(&text).expect("parse");
    Live::restore(live.study, snapshot, Instant::now(), Duration::from_secs(30)).expect("restore")
}

/// Issue 37 moved `federated_power`'s kept stages into `protocols/power/durable.rs` as structs
/// wrapped by newtype variants; stored snapshots were written by the inline struct variants, so
/// the JSON must keep their layout: the stage's fields directly under its name.
#[test]
fn the_kept_stages_keep_the_json_layout_of_stored_snapshots() {
    let names: BTreeMap<u32, String> = (1..=3).map(|i| (i, format!("s{i}"))).collect();
    let study = Uuid::new_v4();
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let mut live = Live::new(
        study,
        Protocol::Power(config()),
        2,
        D,
        names,
        Instant::now() + Duration::from_secs(60),
        Duration::from_secs(30),
    );
    for i in 1..=3 {
        let session = SiteSession::new(study, i, 2, &mut rng);
        let request = JoinRequest {
            n_samples: None,
            encryption_public_key: Some(session.encryption_public_key()),
            mask_public_keys: session.mask_public_keys(),
            signing_public_key: Some(signer(i).public_key()),
            seed_commitment: None,
        };
        live.join(i, request).expect("join");
    }
    live.advance(Instant::now());
    let sharing = serde_json::to_value(live.snapshot(&[])).expect("json");
    let participants = &sharing["stage"]["sharing"]["participants"];
    assert_eq!(participants.as_array().map(Vec::len), Some(3), "{sharing}");
    let (live, _, _) = restored_at_round_one();
    let running = serde_json::to_value(live.snapshot(&[])).expect("json");
    for field in ["participants", "senders", "rounds", "iterate", "inboxes"] {
        assert!(
            running["stage"]["running"].get(field).is_some(),
            "{field}: {running}"
        );
    }
}

/// A snapshot stored by an earlier version (`src/studies/fixtures/<name>.json`) is read,
/// restored, and kept again as the very same JSON: the format did not change. With
/// `PRIVPCA_WRITE_SNAPSHOT_FIXTURES` set, `live`'s snapshot is written there first (run that
/// on the version whose format is to be kept, then commit the file).
pub(crate) fn a_stored_snapshot_is_kept_again_unchanged(name: &str, live: &Live) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/studies/fixtures")
        .join(format!("{name}.json"));
    if std::env::var_os("PRIVPCA_WRITE_SNAPSHOT_FIXTURES").is_some() {
        let value = serde_json::to_value(live.snapshot(&[])).expect("json");
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("fixtures folder");
        std::fs::write(&path, serde_json::to_string_pretty(&value).expect("json") + "\n").expect("write");
    }
    let text = std::fs::read_to_string(&path).expect("the stored snapshot");
    let stored: serde_json::Value = serde_json::from_str(&text).expect("json");
    let snapshot: Snapshot = serde_json::from_str(&text).expect("a stored snapshot reads");
    let (restored, effects) = Live::restore(live.study, snapshot, Instant::now(), Duration::from_secs(30))
        .expect("a stored snapshot restores");
    assert!(effects.is_empty());
    let again = serde_json::to_value(restored.snapshot(&[])).expect("json");
    assert_eq!(again, stored, "{name}: kept again as stored");
}

#[test]
fn stored_federated_power_snapshots_are_kept_again_unchanged() {
    let (live, _, _) = restored_at_round_one();
    a_stored_snapshot_is_kept_again_unchanged("power-round-1", &live);
}

/// A 3-site study restored from its snapshot at the key exchange and again at the opening of
/// round 1 (checking what comes back each time); its sites' sessions and RNG.
fn restored_at_round_one() -> (Live, BTreeMap<u32, SiteSession>, ChaCha20Rng) {
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
                signing_public_key: Some(signer(i).public_key()),
                seed_commitment: None,
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
    let SiteTask::ShareKeys { participants, .. } = live.task(1) else {
        panic!("the key exchange goes on after a restore");
    };
    for (&i, s) in sessions.iter_mut() {
        let boxes = s.share_boxes(&participants, 2, &mut rng).expect("deal");
        live.shares(i, boxes).expect("shares");
    }
    let effects = live.advance(Instant::now());
    assert!(matches!(effects.as_slice(), [Effect::Charge { .. }]));
    let (live, _) = reload(&live, &effects);
    (live, sessions, rng)
}

/// Site `site`'s signing key in these tests.
fn signer(site: u32) -> SiteSigner {
    SiteSigner::from_seed([site as u8; 32])
}

/// `site`'s masked round-1 vector (zero data) as the wire carries it, with its contribution
/// signature, and the roster and iterate hash it masked with.
fn masked_by(
    live: &Live,
    sessions: &mut BTreeMap<u32, SiteSession>,
    site: u32,
) -> (Journaled, Vec<u32>, [u8; 32]) {
    let SiteTask::Contribute {
        round: 1,
        roster,
        inbox,
        iterate,
        rows,
        cols,
        ..
    } = live.task(site)
    else {
        panic!("round 1 opens");
    };
    let session = sessions.get_mut(&site).unwrap();
    session.receive_inbox(&inbox).expect("inbox");
    let masked = session.mask(1, &roster, &[0; D * P]).expect("mask");
    let (signature, hash) = signer(site)
        .sign_contribution(live.study, 1, (rows, cols), &iterate, &roster)
        .expect("sign");
    let message = Journaled::Contribution {
        site,
        round: 1,
        masked: wire::words_to_b64(&masked),
        signature,
    };
    (message, roster, hash)
}

/// Site 1's round-1 contribution.
fn masked_by_site_one(live: &Live, sessions: &mut BTreeMap<u32, SiteSession>) -> Journaled {
    masked_by(live, sessions, 1).0
}

/// `site`'s confirmation of round 1's transcript as its task shows it.
fn confirmation_of(live: &Live, site: u32, roster: &[u32], hash: &[u8; 32]) -> Journaled {
    let SiteTask::Confirm {
        round: 1,
        survivors,
        dropped,
        ..
    } = live.task(site)
    else {
        panic!("round 1 confirms");
    };
    let view = RoundView {
        study: live.study,
        round: 1,
        iterate: hash,
        roster,
    };
    Journaled::Confirm {
        site,
        round: 1,
        signature: signer(site).sign(&confirmation_message(&view, &survivors, &dropped)),
    }
}

/// The whole protocol state of a running study, the open round's messages included (which its
/// snapshot leaves to the journal).
fn whole(live: &Live) -> String {
    let Stage::Running(running) = &live.stage else {
        panic!("running rounds");
    };
    let snapshot = serde_json::to_string(&live.snapshot(&[])).expect("serialise");
    let rounds = serde_json::to_string(&running.rounds.state()).expect("serialise");
    format!("{snapshot}\n{rounds}")
}

/// Restored from `snapshot` (through its JSON).
fn restore(study: Uuid, snapshot: &Snapshot) -> Live {
    let text = serde_json::to_string(snapshot).expect("serialise");
    let snapshot: Snapshot = serde_json::from_str(&text).expect("parse");
    Live::restore(study, snapshot, Instant::now(), Duration::from_secs(30))
        .expect("restore")
        .0
}

/// Round 1 with every site's masked vector accepted (each kept as a journal entry) and
/// collection closed; the journal, and the rosters the sites masked with.
fn unmasking() -> (Live, BTreeMap<u32, SiteSession>, Vec<String>, Vec<u32>) {
    let (mut live, mut sessions, _) = restored_at_round_one();
    assert!(live.snapshot_supersedes_journal(), "nothing is journaled yet");
    let mut journal = Vec::new();
    let mut roster = Vec::new();
    let mut hash = [0; 32];
    for site in 1..=3 {
        let (message, masked_with, masked_over) = masked_by(&live, &mut sessions, site);
        message.apply(&mut live).expect("contribute");
        journal.push(serde_json::to_string(&message).expect("serialise"));
        roster = masked_with;
        hash = masked_over;
    }
    assert!(
        !live.snapshot_supersedes_journal(),
        "the journal holds the vectors"
    );
    let effects = live.advance(Instant::now());
    assert!(effects.is_empty(), "{effects:?}");
    assert_eq!(live.phase_label().as_deref(), Some("confirm-1"));
    for site in 1..=3 {
        let message = confirmation_of(&live, site, &roster, &hash);
        message.apply(&mut live).expect("confirm");
        journal.push(serde_json::to_string(&message).expect("serialise"));
    }
    let effects = live.advance(Instant::now());
    assert!(effects.is_empty(), "{effects:?}");
    assert_eq!(live.phase_label().as_deref(), Some("unmask-1"));
    (live, sessions, journal, roster)
}

/// `site`'s unmasking answer for round 1.
fn answer_of(live: &Live, sessions: &mut BTreeMap<u32, SiteSession>, site: u32, roster: &[u32]) -> Journaled {
    let (survivors, dropped) = match live.task(site) {
        SiteTask::Unmask {
            round: 1,
            survivors,
            dropped,
            ..
        } => (survivors, dropped),
        _ => panic!("round 1 unmasks"),
    };
    let answer = sessions
        .get_mut(&site)
        .unwrap()
        .unmask_response(1, roster, &survivors, &dropped, 2)
        .expect("answer");
    Journaled::Unmask {
        site,
        round: 1,
        answer,
    }
}

#[test]
fn a_restored_study_continues_and_refuses_repeats_and_wrong_phases() {
    let (mut live, mut sessions, _) = restored_at_round_one();
    let message = masked_by_site_one(&live, &mut sessions);
    let Journaled::Contribution {
        masked, signature, ..
    } = message.clone()
    else {
        panic!("a contribution");
    };
    message.apply(&mut live).expect("contribute");
    let (mut live, _) = reload(&live, &[]);
    replay(&mut live, &[serde_json::to_string(&message).expect("serialise")]).expect("replay");
    assert!(matches!(
        live.contribute(1, 1, &masked, &signature),
        Err(LiveError::AlreadyReceived(_))
    ));
    assert!(matches!(
        live.contribute(2, 2, &masked, &signature),
        Err(LiveError::Conflict(_))
    ));
    // Site 2 signing site 1's statement, or site 2's vector under a signature of another roster.
    assert!(matches!(
        live.contribute(2, 1, &masked, &signature),
        Err(LiveError::Invalid(_))
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

/// A message accepted after the snapshot is kept as a journal entry; the snapshot plus the
/// replayed journal is the state that acknowledged it (the same snapshot as the live study's),
/// and the repeat is still refused.
#[test]
fn a_journaled_contribution_replays_onto_the_snapshot() {
    let (mut live, mut sessions, _) = restored_at_round_one();
    let before = live.snapshot(&[]);
    let message = masked_by_site_one(&live, &mut sessions);
    let Journaled::Contribution {
        masked, signature, ..
    } = message.clone()
    else {
        panic!("a contribution");
    };
    let marker = live.marker();
    message.apply(&mut live).expect("contribute");
    assert_eq!(live.marker(), marker, "accepting a message keeps the phase");
    let journal = [serde_json::to_string(&message).expect("serialise")];
    let (mut resumed, _) =
        Live::restore(live.study, before, Instant::now(), Duration::from_secs(30)).expect("restore");
    replay(&mut resumed, &journal).expect("replay");
    assert_eq!(whole(&resumed), whole(&live));
    assert!(matches!(
        resumed.contribute(1, 1, &masked, &signature),
        Err(LiveError::AlreadyReceived(_))
    ));
    let wrong = [journal[0].replace("\"round\":1", "\"round\":2")];
    let (mut other, _) = reload(&resumed, &[]);
    assert!(
        replay(&mut other, &wrong).is_err(),
        "an entry that does not fit is refused"
    );
}

/// The snapshot written when collection closes omits the masked vectors (the journal keeps
/// them): restored with the journal, the study is exactly the one that acknowledged them, also
/// after an unmasking answer, and it finishes the round as the live study does; a journal that
/// lacks a survivor's vector is refused. The snapshot of the next round holds the journal's
/// all (none of the round's messages) and empties it.
#[test]
fn an_unmasking_snapshot_leaves_the_round_to_the_journal() {
    let (mut live, mut sessions, mut journal, roster) = unmasking();
    let kept = live.snapshot(&[]);
    let StageSnapshot::Running(kept_round) = &kept.stage else {
        panic!("running");
    };
    let rounds = &kept_round.rounds;
    assert!(rounds.masked.is_empty() && rounds.answers.is_empty());
    assert!(!live.snapshot_supersedes_journal());

    let first = answer_of(&live, &mut sessions, 1, &roster);
    first.apply(&mut live).expect("unmask");
    journal.push(serde_json::to_string(&first).expect("serialise"));
    let mut resumed = restore(live.study, &kept);
    replay(&mut resumed, &journal).expect("replay");
    assert_eq!(whole(&resumed), whole(&live));
    let mut short = restore(live.study, &kept);
    let without: Vec<String> = journal
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, entry)| entry.clone())
        .collect();
    let refused = replay(&mut short, &without).expect_err("a survivor's vector is missing");
    assert!(refused.contains("[2]"), "{refused}");

    for site in 2..=3 {
        let answer = answer_of(&live, &mut sessions, site, &roster);
        answer.apply(&mut live).expect("unmask");
        answer.replay(&mut resumed).expect("unmask after the restore");
    }
    let done = live.advance(Instant::now());
    assert!(
        matches!(done.as_slice(), [Effect::Progress { done: 1 }]),
        "{done:?}"
    );
    let again = resumed.advance(Instant::now());
    assert!(
        matches!(again.as_slice(), [Effect::Progress { done: 1 }]),
        "{again:?}"
    );
    assert_eq!(
        whole(&resumed),
        whole(&live),
        "the same sum, the same next iterate"
    );
    assert!(live.snapshot_supersedes_journal(), "round 2 has received nothing");
}

/// The close of a round's collection (nobody dropped) and of its consistency round are kept as
/// journal rows, not snapshots: the snapshot of the round's collection or of its consistency
/// round, plus the journal (contributions, the close, confirmations, the close, an answer),
/// restores exactly the study that unmasks. Replayed onto a snapshot already of that round's
/// unmasking they change nothing; a close of another round, or of a collection whose journal
/// lacks a vector, is refused.
#[test]
fn the_closes_of_a_round_s_phases_are_journal_rows() {
    let (mut live, mut sessions, _) = restored_at_round_one();
    let (mut journal, mut roster, mut hash) = (Vec::new(), Vec::new(), [0; 32]);
    for site in 1..=3 {
        let (message, masked_with, masked_over) = masked_by(&live, &mut sessions, site);
        message.apply(&mut live).expect("contribute");
        journal.push(serde_json::to_string(&message).expect("serialise"));
        (roster, hash) = (masked_with, masked_over);
    }
    let at_collect = live.snapshot(&[]);
    let before = live.marker();
    assert!(live.advance(Instant::now()).is_empty());
    let step = live
        .journal_step(before)
        .expect("closing collection is journaled");
    assert_eq!(step, Journaled::Collected { round: 1 });
    journal.push(serde_json::to_string(&step).expect("serialise"));
    let at_confirm = live.snapshot(&[]);
    for site in 1..=3 {
        let message = confirmation_of(&live, site, &roster, &hash);
        message.apply(&mut live).expect("confirm");
        journal.push(serde_json::to_string(&message).expect("serialise"));
    }
    let before = live.marker();
    assert!(live.advance(Instant::now()).is_empty());
    let step = live.journal_step(before).expect("the close is journaled");
    assert_eq!(step, Journaled::Unmasking { round: 1 });
    journal.push(serde_json::to_string(&step).expect("serialise"));
    let answer = answer_of(&live, &mut sessions, 1, &roster);
    answer.apply(&mut live).expect("unmask");
    journal.push(serde_json::to_string(&answer).expect("serialise"));

    for (snapshot, label) in [(&at_collect, "round-1"), (&at_confirm, "confirm-1")] {
        let mut resumed = restore(live.study, snapshot);
        assert_eq!(resumed.phase_label().as_deref(), Some(label));
        replay(&mut resumed, &journal).expect("replay");
        assert_eq!(resumed.phase_label().as_deref(), Some("unmask-1"));
        assert_eq!(whole(&resumed), whole(&live));
    }
    // The close of a collection whose journal lacks a vector is refused.
    let mut short = restore(live.study, &at_collect);
    let without_two: Vec<String> = journal
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, e)| e.clone())
        .collect();
    assert!(replay(&mut short, &without_two).is_err());

    let mut again = restore(live.study, &live.snapshot(&[]));
    replay(&mut again, &journal).expect("the close replays onto an unmasking snapshot");
    assert_eq!(whole(&again), whole(&live));
    let mut wrong = restore(live.study, &at_confirm);
    let other = serde_json::to_string(&Journaled::Unmasking { round: 2 }).expect("serialise");
    assert!(replay(&mut wrong, &[other]).is_err(), "round 2 is not open");
}

/// A snapshot written before the journal kept the open round (its masked vectors inside) still
/// restores, and the study's snapshots keep holding that round (superseding the journal) until
/// it ends, so none of its vectors is lost.
#[test]
fn an_old_snapshot_holding_the_round_still_restores() {
    let (live, _, _, _) = unmasking();
    let Stage::Running(running) = &live.stage else {
        panic!("running");
    };
    let mut old = live.snapshot(&[]);
    let StageSnapshot::Running(kept_round) = &mut old.stage else {
        panic!("running");
    };
    let rounds = &mut kept_round.rounds;
    **rounds = running.rounds.state();
    assert_eq!(rounds.masked.len(), 3);
    let mut resumed = restore(live.study, &old);
    replay(&mut resumed, &[]).expect("nothing to replay");
    let rounds_of = |l: &Live| whole(l).rsplit('\n').next().map(str::to_owned);
    assert_eq!(rounds_of(&resumed), rounds_of(&live));
    assert!(resumed.snapshot_supersedes_journal());
    let StageSnapshot::Running(kept_round) = resumed.snapshot(&[]).stage else {
        panic!("running");
    };
    let rounds = kept_round.rounds;
    assert_eq!(rounds.masked.len(), 3, "the round stays in the snapshot");
}

/// The iterate and the last release are kept as base64 of their bytes (exact, about half the
/// size of JSON numbers); a snapshot written before that, holding JSON numbers, restores to
/// the same state.
#[test]
fn kept_matrices_are_base64_and_old_json_numbers_still_restore() {
    let (live, _, journal, _) = unmasking();
    let kept = live.snapshot(&[]);
    let StageSnapshot::Running(kept_round) = &kept.stage else {
        panic!("running");
    };
    let iterate = &kept_round.iterate;
    assert!(matches!(iterate, KeptValues::Base64(_)), "{iterate:?}");
    let mut old = serde_json::to_value(&kept).expect("serialise");
    let running = &mut old["stage"]["running"];
    let Some(text) = running["iterate"].as_str().map(str::to_owned) else {
        panic!("the iterate is kept as text: {running}");
    };
    let bytes = wire::decode(&text).expect("base64");
    let numbers: Vec<f64> = bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    assert!(!numbers.is_empty());
    running["iterate"] = serde_json::json!(numbers);
    let old: Snapshot = serde_json::from_value(old).expect("an old snapshot parses");
    let StageSnapshot::Running(kept_round) = &old.stage else {
        panic!("running");
    };
    let iterate = &kept_round.iterate;
    assert!(matches!(iterate, KeptValues::Numbers(_)));
    let mut resumed = restore(live.study, &old);
    replay(&mut resumed, &journal).expect("the journal replays");
    assert_eq!(whole(&resumed), whole(&live), "the same state");
}

/// A SecAgg+ roster whose sum could hold fewer honest releases than t (⌈δ·S⌉ out and all the
/// ⌈γ·S_invited⌉ corrupt sites in it) fails when enrolment ends, before any reveal or charge,
/// as every site would refuse it; one more site and the key exchange opens.
#[test]
fn a_secagg_plus_roster_with_too_few_honest_survivors_fails_at_enrolment_end() {
    use crate::algorithms::federated_power::SecAggPlus;
    use crate::federation::status::StudyStatus;
    let mut config = config();
    config.sites = 10;
    config.threshold = 7;
    config.secagg_plus = Some(SecAggPlus {
        corruption_rate: 0.1,
        dropout_rate: 0.1,
        degree: 4,
        threshold: 3,
    });
    let outcome = |joined: u32| {
        let study = Uuid::new_v4();
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let names: BTreeMap<u32, String> = (1..=10).map(|i| (i, format!("s{i}"))).collect();
        let mut live = Live::new(
            study,
            Protocol::Power(config.clone()),
            7,
            D,
            names,
            Instant::now(),
            Duration::from_secs(30),
        );
        for i in 1..=joined {
            let session = SiteSession::new(study, i, config.total_rounds(), &mut rng);
            let request = JoinRequest {
                n_samples: None,
                encryption_public_key: Some(session.encryption_public_key()),
                mask_public_keys: session.mask_public_keys(),
                signing_public_key: Some(signer(i).public_key()),
                seed_commitment: Some(wire::encode(&[i as u8; 32])),
            };
            live.join(i, request).expect("join");
        }
        live.advance(Instant::now());
        live
    };
    // 8 of 10: 8 − ⌈0.8⌉ out − ⌈1.0⌉ corrupt = 6 < 7.
    let failed = outcome(8);
    let Stage::Finished { status, reason } = &failed.stage else {
        panic!("the study should have ended")
    };
    assert_eq!(*status, StudyStatus::Failed);
    let reason = reason.as_deref().unwrap_or_default();
    assert!(reason.contains("as few as 6 honest releases"), "{reason}");
    // 9 of 10: 9 − 1 − 1 = 7.
    assert!(matches!(outcome(9).stage, Stage::Sharing(_)));
}
