//! Tests of the SecAgg+ graph: parameters, determinism, regularity, x-coordinates.

use std::collections::BTreeSet;

use super::*;

fn spec(sites: u32, seed: u8) -> GraphSpec {
    GraphSpec::new([seed; 32], sites, 0.05, 0.05).expect("feasible")
}

#[test]
fn parameters_grow_slowly_and_stay_below_s() {
    let (k100, t100) = choose_parameters(100, 0.05, 0.05).unwrap();
    let (k1000, t1000) = choose_parameters(1000, 0.05, 0.05).unwrap();
    let (k10000, _) = choose_parameters(10_000, 0.05, 0.05).unwrap();
    assert!(k1000 < 999 && k1000 % 2 == 0, "k = {k1000}");
    assert!(k1000 >= k100 && k10000 >= k1000);
    assert!(k10000 < 200, "k(10⁴) = {k10000} is not polylogarithmic");
    // A lying coordinator cannot collect both secrets: 2t > k.
    assert!(2 * t1000 > k1000 && t1000 <= k1000);
    assert!(2 * t100 > k100 && t100 <= k100);
}

#[test]
fn parameters_match_the_worked_values() {
    // Worked by hand in docs/design/federation.md ("SecAgg+"): 1 corrupt and 1 dropped site
    // among 10; and 1 of each among 5, where only every other site will do.
    assert_eq!(choose_parameters(10, 0.1, 0.1).unwrap(), (4, 3));
    assert_eq!(choose_parameters(5, 0.2, 0.2).unwrap(), (4, 3));
    assert_eq!(choose_parameters(1000, 0.1, 0.1).unwrap(), (96, 67));
}

#[test]
fn rates_outside_the_regime_are_refused() {
    for (g, d) in [(-0.1, 0.0), (0.0, f64::NAN), (0.5, 0.3), (f64::INFINITY, 0.0)] {
        assert!(
            matches!(choose_parameters(100, g, d), Err(SecAggError::Rates(_))),
            "{g} {d}"
        );
    }
    assert!(matches!(
        choose_parameters(2, 0.0, 0.0),
        Err(SecAggError::NoGraph { .. })
    ));
}

#[test]
fn higher_rates_need_larger_neighbourhoods() {
    let (low, _) = choose_parameters(1000, 0.01, 0.01).unwrap();
    let (high, _) = choose_parameters(1000, 0.2, 0.1).unwrap();
    assert!(high > low, "k {high} at γ = 0.2, δ = 0.1 vs {low} at 1%");
}

#[test]
fn the_graph_is_k_regular_symmetric_and_deterministic() {
    let roster: Vec<u32> = (1..=200).map(|i| i * 3).collect();
    let s = spec(200, 7);
    let g = Neighbourhoods::derive(&roster, &s).unwrap();
    let mut reversed = roster.clone();
    reversed.reverse();
    assert_eq!(g, Neighbourhoods::derive(&reversed, &s).unwrap());
    assert_ne!(g, Neighbourhoods::derive(&roster, &spec(200, 8)).unwrap());
    let k = s.degree as usize;
    for &site in &roster {
        let n = g.neighbours(site);
        assert_eq!(n.len(), k);
        assert_eq!(n.iter().collect::<BTreeSet<_>>().len(), k);
        assert!(!n.contains(&site));
        for (x, &j) in n.iter().enumerate() {
            assert_eq!(g.share_x(site, j), Some(x as u8 + 1));
            assert!(g.are_neighbours(j, site));
        }
    }
    let outsider = roster.iter().find(|&&j| j != 3 && !g.are_neighbours(3, j));
    assert!(outsider.is_some_and(|&j| g.share_x(3, j).is_none()));
}

#[test]
fn a_spec_with_other_parameters_is_refused() {
    let roster: Vec<u32> = (1..=100).collect();
    let good = spec(100, 1);
    for tampered in [
        GraphSpec {
            degree: good.degree - 2,
            ..good
        },
        GraphSpec {
            threshold: good.threshold - 1,
            ..good
        },
    ] {
        assert!(matches!(
            Neighbourhoods::derive(&roster, &tampered),
            Err(SecAggError::GraphMismatch { .. })
        ));
    }
    // The spec was derived for 100 sites; a roster of 90 gives other parameters.
    let smaller: Vec<u32> = (1..=90).collect();
    let other = choose_parameters(90, 0.05, 0.05).unwrap();
    if other != (good.degree, good.threshold) {
        assert!(Neighbourhoods::derive(&smaller, &good).is_err());
    }
}
