//! A gossip study rebuilt from its snapshot after every post and every step goes on where it
//! stood: the same tasks with the same relayed bytes, repeats and wrong exchanges still
//! refused, the simulation's basis at the end; a damaged kept exchange is refused.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::super::coordinator::tests::{N, plan, records, relay, simulated_basis, started};
use crate::algorithms::gossip::agent::schedule;
use crate::studies::durable::Snapshot;
use crate::studies::live::Live;

/// Through the snapshot's JSON, as the database keeps it.
fn reload(live: &Live) -> Live {
    let snapshot = live.snapshot(&[]);
    let text = serde_json::to_string(&snapshot).expect("serialise");
    let snapshot: Snapshot = serde_json::from_str(&text).expect("parse");
    let (restored, _) =
        Live::restore(live.study, snapshot, Instant::now(), Duration::from_secs(30)).expect("restore");
    restored
}

#[test]
fn a_study_reloaded_at_every_step_relays_the_same_values_to_the_simulated_basis() {
    let plan = plan();
    let xt = records();
    let mut live = reload(&started(&plan));
    assert_eq!(live.phase_label().as_deref(), Some("exchange-1"));
    let mut reloads = 0;
    let basis = relay(&mut live, &xt, |live| {
        let before = live.task(2);
        let label = live.phase_label();
        *live = reload(live);
        assert_eq!(live.task(2), before, "the same task after a reload");
        assert_eq!(live.phase_label(), label);
        reloads += 1;
    });
    assert!(reloads > 10, "{reloads}");
    assert_eq!(basis, simulated_basis(&plan, &xt));
}

/// The snapshot's JSON after the first exchange closed, with `damage` done to its kept
/// exchange; whether it restores.
fn restores_after(damage: impl FnOnce(&mut Value)) -> Result<(), String> {
    let plan = plan();
    let mut live = started(&plan);
    super::super::coordinator::tests::confirm_all(&mut live);
    let p = plan.config.gossip.p;
    let gram = crate::federation::wire::f64s_to_b64(&vec![0.5; p * p]);
    for site in 1..=3 {
        live.gossip_post(site, 1, &gram).expect("accepted");
    }
    live.advance(Instant::now());
    let (rows, cols) = schedule(&plan.config.gossip)[1].shape(N, p, plan.config.blocks[0]);
    let second = crate::federation::wire::f64s_to_b64(&vec![0.5; rows * cols]);
    live.gossip_post(1, 2, &second).expect("accepted");
    let mut value = serde_json::to_value(live.snapshot(&[])).expect("serialise");
    damage(&mut value["stage"]["gossip"]);
    let snapshot: Snapshot = serde_json::from_value(value).map_err(|e| e.to_string())?;
    Live::restore(live.study, snapshot, Instant::now(), Duration::from_secs(30)).map(|_| ())
}

/// A change made to a kept exchange's JSON.
type Damage = Box<dyn FnOnce(&mut Value)>;

#[test]
fn a_damaged_kept_exchange_is_refused() {
    assert_eq!(restores_after(|_| {}), Ok(()));
    let short = crate::federation::wire::f64s_to_b64(&[0.5]);
    let damages: [(&str, Damage); 7] = [
        ("past the schedule", Box::new(|k| k["step"] = json!(100_000))),
        ("a short post", Box::new(move |k| k["posts"]["1"] = json!(short))),
        (
            "a post from outside the roster",
            Box::new(|k| {
                k["posts"]["9"] = k["posts"]["1"].clone();
            }),
        ),
        (
            "an agent missing from the previous exchange",
            Box::new(|k| {
                k["previous"].as_object_mut().unwrap().remove("2");
            }),
        ),
        ("a roster of two", Box::new(|k| k["roster"] = json!([1, 2]))),
        ("no records", Box::new(|k| k["n"] = json!(0))),
        (
            "previous values before the first exchange",
            Box::new(|k| k["step"] = json!(0)),
        ),
    ];
    for (what, damage) in damages {
        assert!(restores_after(damage).is_err(), "{what} was restored");
    }
}

#[test]
fn a_stored_gossip_snapshot_is_kept_again_unchanged() {
    let live = reload(&started(&plan()));
    crate::studies::durable::tests::a_stored_snapshot_is_kept_again_unchanged("gossip-exchange-1", &live);
}
