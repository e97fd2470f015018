//! The consistency rule against a coordinator that shows every site its own view of a round:
//! random rosters, iterates and survivor sets per site, up to c colluding sites that sign
//! anything and reveal everything. Whatever the views, the shares the honest sites reveal
//! never let the coordinator remove the self mask of a site whose view differed from theirs,
//! nor unmask any honest site's vector alone.

use std::collections::{BTreeMap, BTreeSet};

use ed25519_dalek::VerifyingKey;
use proptest::prelude::*;
use uuid::Uuid;

use super::OwnRound;
use crate::federation::messages::SiteSignature;
use crate::federation::transcript::{self, RoundView, SiteSigner, quorum};

/// One site's view of round 1, as the coordinator showed it.
#[derive(Clone, Debug)]
struct Shown {
    roster: Vec<u32>,
    iterate: [u8; 32],
    survivors: Vec<u32>,
    dropped: Vec<u32>,
}

/// A random scenario: S sites, c colluders (the last c indices), t, and each honest site's view.
#[derive(Clone, Debug)]
struct Scenario {
    sites: u32,
    colluding: u32,
    threshold: u32,
    shown: BTreeMap<u32, Shown>,
}

fn subset_with(all: &[u32], me: u32, bits: u64) -> Vec<u32> {
    let mut out: Vec<u32> = all
        .iter()
        .copied()
        .enumerate()
        .filter(|(i, s)| *s == me || bits >> i & 1 == 1)
        .map(|(_, s)| s)
        .collect();
    out.sort_unstable();
    out
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (3u32..=9)
        .prop_flat_map(|sites| (Just(sites), 0u32..=2))
        .prop_filter("2q − c ≤ S needs c < S", |(s, c)| c + 1 < *s)
        .prop_flat_map(|(sites, colluding)| {
            let q = quorum(sites, colluding);
            (
                Just(sites),
                Just(colluding),
                q.max(colluding + 1)..=sites,
                proptest::collection::vec(
                    (any::<u8>(), any::<u64>(), any::<u64>(), any::<u8>()),
                    sites as usize,
                ),
            )
        })
        .prop_map(|(sites, colluding, threshold, draws)| {
            let all: Vec<u32> = (1..=sites).collect();
            let honest = sites - colluding;
            let mut shown = BTreeMap::new();
            for (i, (kind, roster_bits, survivor_bits, iterate)) in draws.into_iter().enumerate() {
                let me = i as u32 + 1;
                if me > honest {
                    continue;
                }
                // Half the sites see the honest round; the others a roster, an iterate or a
                // survivor set of the coordinator's choosing.
                let roster = if kind & 1 == 0 {
                    all.clone()
                } else {
                    subset_with(&all, me, roster_bits)
                };
                let iterate = if kind & 2 == 0 { [0; 32] } else { [iterate % 3; 32] };
                let survivors = if kind & 4 == 0 {
                    roster.clone()
                } else {
                    subset_with(&roster, me, survivor_bits)
                };
                let dropped = roster
                    .iter()
                    .copied()
                    .filter(|s| !survivors.contains(s))
                    .collect();
                shown.insert(
                    me,
                    Shown {
                        roster,
                        iterate,
                        survivors,
                        dropped,
                    },
                );
            }
            Scenario {
                sites,
                colluding,
                threshold,
                shown,
            }
        })
}

fn signer(site: u32) -> SiteSigner {
    SiteSigner::from_seed([site as u8; 32])
}

fn view<'a>(study: Uuid, shown: &'a Shown) -> RoundView<'a> {
    RoundView {
        study,
        round: 1,
        iterate: &shown.iterate,
        roster: &shown.roster,
    }
}

/// Runs the round against the scenario's coordinator; returns the honest sites that revealed.
fn revealers(s: &Scenario, study: Uuid, keys: &BTreeMap<u32, VerifyingKey>) -> BTreeSet<u32> {
    let honest = s.sites - s.colluding;
    let is_colluder = |site: u32| site > honest;
    // Contribution signatures: an honest site signs its own view; a colluder signs whatever
    // view the coordinator needs for the site it is relayed to.
    let contributions_for = |to: &Shown| -> Vec<SiteSignature> {
        to.survivors
            .iter()
            .map(|&u| {
                let own = if is_colluder(u) { to } else { &s.shown[&u] };
                SiteSignature {
                    site: u,
                    signature: signer(u).sign(&transcript::contribution_message(&view(study, own))),
                }
            })
            .collect()
    };
    let need = s.threshold.max(quorum(s.sites, s.colluding));
    // The consistency round: each honest site checks its own transcript and signs it if it may.
    let mut confirmations: Vec<(u32, Vec<u8>, String)> = Vec::new();
    for (&me, shown) in &s.shown {
        let own = OwnRound {
            me,
            view: view(study, shown),
            keys,
            neighbours: None,
        };
        if own
            .check_transcript(&shown.survivors, &shown.dropped, &contributions_for(shown), need)
            .is_ok()
        {
            let message = transcript::confirmation_message(&own.view, &shown.survivors, &shown.dropped);
            let signature = signer(me).sign(&message);
            confirmations.push((me, message, signature));
        }
    }
    let confirmed: BTreeSet<u32> = confirmations.iter().map(|(site, _, _)| *site).collect();
    // The unmask request: the coordinator relays every confirmation it holds, and colluders'
    // confirmations of each honest site's own transcript.
    let mut out = BTreeSet::new();
    for (&me, shown) in &s.shown {
        if !confirmed.contains(&me) {
            continue;
        }
        let own = OwnRound {
            me,
            view: view(study, shown),
            keys,
            neighbours: None,
        };
        let message = transcript::confirmation_message(&own.view, &shown.survivors, &shown.dropped);
        let mut relayed: Vec<SiteSignature> = confirmations
            .iter()
            .map(|(site, _, signature)| SiteSignature {
                site: *site,
                signature: signature.clone(),
            })
            .collect();
        relayed.extend((honest + 1..=s.sites).map(|c| SiteSignature {
            site: c,
            signature: signer(c).sign(&message),
        }));
        let need = quorum(s.sites, s.colluding) as usize;
        if own.confirmed_by(&shown.survivors, &shown.dropped, &relayed, need) >= need {
            out.insert(me);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn no_view_the_coordinator_shows_unmasks_one_site(s in scenario()) {
        let study = Uuid::from_u128(36);
        let keys: BTreeMap<u32, VerifyingKey> = (1..=s.sites)
            .map(|i| (i, transcript::verifying_key(&signer(i).public_key()).unwrap()))
            .collect();
        let honest = s.sites - s.colluding;
        let revealed = revealers(&s, study, &keys);
        let t = s.threshold as usize;
        let c = s.colluding as usize;
        // Shares the coordinator holds of each secret: one per honest revealer that names the
        // site in that role, and one from every colluder.
        let b_shares = |w: u32| revealed.iter().filter(|r| s.shown[r].survivors.contains(&w)).count() + c;
        let s_shares = |w: u32| revealed.iter().filter(|r| s.shown[r].dropped.contains(&w)).count() + c;
        for v in 1..=honest {
            let mine = &s.shown[&v];
            if b_shares(v) >= t {
                // Its self mask is removable only if every honest revealer that named it a
                // survivor masked the same round as it did (roster and iterate).
                for r in revealed.iter().filter(|r| s.shown[r].survivors.contains(&v)) {
                    let theirs = &s.shown[r];
                    prop_assert_eq!(&theirs.roster, &mine.roster, "site {} revealed b_{} over another roster", r, v);
                    prop_assert_eq!(theirs.iterate, mine.iterate, "site {} revealed b_{} over another iterate", r, v);
                }
                // And its vector is never unmasked alone: some pair mask with an honest partner
                // stays secret.
                let partner_hidden = mine.roster.iter().any(|&j| {
                    j != v && j <= honest && s_shares(j) < t && s_shares(v) < t
                });
                prop_assert!(partner_hidden, "site {}'s vector is unmasked alone: {:?}", v, s);
            }
            // Never both secrets of one site.
            prop_assert!(!(b_shares(v) >= t && s_shares(v) >= t), "both secrets of site {}: {:?}", v, s);
        }
    }
}

/// The rule is not vacuous: the honest round is revealed by everyone.
#[test]
fn an_honest_round_is_revealed_by_every_site() {
    let study = Uuid::from_u128(36);
    for (sites, colluding) in [(5, 0), (10, 0), (9, 2)] {
        let all: Vec<u32> = (1..=sites).collect();
        let shown = (1..=sites - colluding)
            .map(|i| {
                (
                    i,
                    Shown {
                        roster: all.clone(),
                        iterate: [0; 32],
                        survivors: all.clone(),
                        dropped: Vec::new(),
                    },
                )
            })
            .collect();
        let s = Scenario {
            sites,
            colluding,
            threshold: quorum(sites, colluding),
            shown,
        };
        let keys = (1..=sites)
            .map(|i| (i, transcript::verifying_key(&signer(i).public_key()).unwrap()))
            .collect();
        assert_eq!(revealers(&s, study, &keys).len(), (sites - colluding) as usize);
    }
}

/// SecAgg+: a site checks the contribution signatures of its graph neighbours only (the sites
/// whose secrets it holds shares of). A non-neighbour's missing or foreign signature does not
/// stop it; a neighbour's does.
#[test]
fn under_secagg_plus_a_site_checks_its_neighbours_signatures_only() {
    let study = Uuid::from_u128(38);
    let all: Vec<u32> = (1..=6).collect();
    let honest = Shown {
        roster: all.clone(),
        iterate: [0; 32],
        survivors: all.clone(),
        dropped: Vec::new(),
    };
    let keys: BTreeMap<u32, VerifyingKey> = all
        .iter()
        .map(|&i| (i, transcript::verifying_key(&signer(i).public_key()).unwrap()))
        .collect();
    let neighbours: BTreeSet<u32> = [2, 6].into_iter().collect();
    let own = OwnRound {
        me: 1,
        view: view(study, &honest),
        keys: &keys,
        neighbours: Some(&neighbours),
    };
    let signed = |u: u32, shown: &Shown| SiteSignature {
        site: u,
        signature: signer(u).sign(&transcript::contribution_message(&view(study, shown))),
    };
    let other = Shown {
        iterate: [1; 32],
        ..honest.clone()
    };
    // Neighbours 2 and 6 signed this view; 4 (not a neighbour) signed another one.
    let relayed = vec![signed(2, &honest), signed(4, &other), signed(6, &honest)];
    own.check_transcript(&all, &[], &relayed, 4).unwrap();
    // Neighbour 6 signed another iterate: refused, naming it.
    let foreign = vec![signed(2, &honest), signed(6, &other)];
    let e = own.check_transcript(&all, &[], &foreign, 4).unwrap_err();
    assert!(e.contains("survivor 6"), "{e}");
    // Neighbour 2's signature missing: refused.
    let e = own
        .check_transcript(&all, &[], &[signed(6, &honest)], 4)
        .unwrap_err();
    assert!(e.contains("survivor 2"), "{e}");
    // On the complete graph the non-neighbour's foreign signature is refused.
    let complete = OwnRound {
        neighbours: None,
        ..own
    };
    let every: Vec<SiteSignature> = all
        .iter()
        .map(|&u| {
            if u == 4 {
                signed(4, &other)
            } else {
                signed(u, &honest)
            }
        })
        .collect();
    let e = complete.check_transcript(&all, &[], &every, 4).unwrap_err();
    assert!(e.contains("survivor 4"), "{e}");
}

/// Under SecAgg+ the study's assumed corrupt sites count as colluders in the quorum (found in
/// the review of session 34). With c = 0, a coordinator that showed two halves of the 180
/// honest sites of a 200-site study (γ = 0.1: 20 corrupt) two transcripts, the same roster and
/// iterate but different dropped sets within the ⌈δS⌉ cap, completed each half's 90
/// confirmations with the 20 corrupt sites' to 110 ≥ q = 101, and both halves revealed. With
/// the corrupt sites counted, q = 111 and neither does.
#[test]
fn a_secagg_plus_quorum_counts_the_study_s_corrupt_sites() {
    use crate::algorithms::federated_power::SecAggPlus;
    let study = Uuid::from_u128(38);
    let sites = 200u32;
    let keys: BTreeMap<u32, VerifyingKey> = (1..=sites)
        .map(|i| (i, transcript::verifying_key(&signer(i).public_key()).unwrap()))
        .collect();
    let roster: Vec<u32> = (1..=sites).collect();
    let iterate = [7u8; 32];
    let mut config = crate::studies::durable::tests::config();
    config.sites = sites;
    config.secagg_plus = Some(SecAggPlus {
        corruption_rate: 0.1,
        dropout_rate: 0.1,
        degree: 56,
        threshold: 39,
    });
    let counted = super::super::colluding(0, &config, sites);
    assert_eq!(counted, 20);
    let halves: [(Vec<u32>, Vec<u32>); 2] = [
        ((1..=90).collect(), (161..=180).collect()),
        ((91..=180).collect(), (1..=20).collect()),
    ];
    let mut counts = Vec::new();
    for (half, dropped) in &halves {
        let survivors: Vec<u32> = roster.iter().copied().filter(|s| !dropped.contains(s)).collect();
        let own = OwnRound {
            me: half[0],
            view: RoundView {
                study,
                round: 1,
                iterate: &iterate,
                roster: &roster,
            },
            keys: &keys,
            neighbours: None,
        };
        let message = transcript::confirmation_message(&own.view, &survivors, dropped);
        let relayed: Vec<SiteSignature> = half
            .iter()
            .copied()
            .chain(181..=sites)
            .map(|site| SiteSignature {
                site,
                signature: signer(site).sign(&message),
            })
            .collect();
        counts.push(own.confirmed_by(&survivors, dropped, &relayed, sites as usize));
    }
    assert_eq!(counts, [110, 110]);
    let old = quorum(sites, 0) as usize;
    assert!(counts.iter().all(|&c| c >= old), "c = 0 let both halves reveal");
    let need = quorum(sites, counted) as usize;
    assert!(counts.iter().all(|&c| c < need), "{counts:?} against q = {need}");
}

/// Under SecAgg+ a site refuses terms that could leave fewer honest releases in a round's sum
/// than t: S less ⌈δS⌉ out less ⌈γ·S_invited⌉ corrupt (the whole ⌈γ·S_invited⌉ is assumed in a
/// roster that shrank); the complete graph states no corrupt sites and is not checked here.
#[test]
fn a_site_refuses_secagg_plus_terms_with_fewer_honest_survivors_than_t() {
    use crate::algorithms::federated_power::SecAggPlus;
    let mut config = crate::studies::durable::tests::config();
    assert!(super::super::check_honest_survivors(&config, 100, 100, 100).is_ok());
    config.secagg_plus = Some(SecAggPlus {
        corruption_rate: 0.2,
        dropout_rate: 0.2,
        degree: 40,
        threshold: 28,
    });
    // 100 − 20 out − 20 corrupt = 60.
    assert!(super::super::check_honest_survivors(&config, 100, 100, 60).is_ok());
    assert!(super::super::check_honest_survivors(&config, 100, 100, 61).is_err());
    // A roster of 90 of the 100 invited: 90 − 18 out − 20 corrupt = 52.
    assert!(super::super::check_honest_survivors(&config, 100, 90, 52).is_ok());
    assert!(super::super::check_honest_survivors(&config, 100, 90, 53).is_err());
}
