use super::*;

#[test]
fn named_graphs_are_valid_with_known_spectra() {
    // Ring of 4 with weights 1/3: eigenvalues 1/3 + 2/3·cos(2πj/4) = 1, 1/3, −1/3, 1/3.
    let ring = Mixing::build(&GraphSpec::Ring, 4).expect("ring");
    assert!((ring.slem() - 1.0 / 3.0).abs() < 1e-12);
    assert!((ring.matrix()[(0, 1)] - 1.0 / 3.0).abs() < 1e-15);
    // Complete graph: W = 11ᵀ/m, consensus in one round.
    let complete = Mixing::build(&GraphSpec::Complete, 5).expect("complete");
    assert!(complete.slem() < 1e-12);
    assert_eq!(complete.rounds_for(1e-4, 100), 1);
    // Star: leaves keep 1 − 1/m, SLEM = 1 − 1/m.
    let star = Mixing::build(&GraphSpec::Star, 4).expect("star");
    assert!((star.slem() - 0.75).abs() < 1e-12);
    assert!(Mixing::build(&GraphSpec::Path, 6).is_ok());
    assert!(Mixing::build(&GraphSpec::Ring, 2).is_ok());
    assert_eq!(ring.rounds_for(1e-4, 1000), 9);
    assert_eq!(star.rounds_for(1e-4, 10), 10);
}

#[test]
fn gossip_reaches_the_mean_at_the_slem_rate() {
    let ring = Mixing::build(&GraphSpec::Ring, 6).expect("ring");
    let states: Vec<Matrix> = (0..6).map(|i| Matrix::from_element(2, 1, i as f64)).collect();
    let mean = 2.5;
    for rounds in [5, 20, 60] {
        let out = ring.gossip(&states, rounds);
        let err = out.iter().map(|z| (z[(0, 0)] - mean).abs()).fold(0.0, f64::max);
        // Disagreement ≤ SLEM^K·‖z − mean‖₂.
        let bound = ring.slem().powi(rounds as i32) * 17.5_f64.sqrt();
        assert!(err <= bound + 1e-12, "K = {rounds}: {err} > {bound}");
        // The sum is preserved exactly (W is doubly stochastic).
        let total: f64 = out.iter().map(|z| z[(1, 0)]).sum();
        assert!((total - 15.0).abs() < 1e-9);
    }
}

#[test]
fn bad_matrices_are_refused_with_the_reason() {
    let reason = |rows: Vec<Vec<f64>>| Mixing::build(&GraphSpec::Matrix(rows), 3).expect_err("refused").0;
    for (rows, why) in [
        (vec![vec![0.5, 0.5], vec![0.5, 0.5]], "3×3"),
        (
            vec![vec![0.5, 0.5, 0.0], vec![0.3, 0.4, 0.3], vec![0.2, 0.1, 0.7]],
            "symmetric",
        ),
        (
            vec![vec![0.5, 0.5, 0.0], vec![0.5, 0.6, 0.0], vec![0.0, 0.0, 1.0]],
            "doubly stochastic",
        ),
        (
            vec![vec![1.5, -0.5, 0.0], vec![-0.5, 1.0, 0.5], vec![0.0, 0.5, 0.5]],
            "nonnegative",
        ),
        (
            vec![vec![0.5, 0.5, 0.0], vec![0.5, 0.5, 0.0], vec![0.0, 0.0, 1.0]],
            "disconnected",
        ),
    ] {
        let got = reason(rows.clone());
        assert!(got.contains(why), "{rows:?}: {got}");
    }
    // Connected but bipartite with zero self-weights: eigenvalue −1.
    let flip = Mixing::build(&GraphSpec::Matrix(vec![vec![0.0, 1.0], vec![1.0, 0.0]]), 2);
    assert!(flip.expect_err("refused").0.contains("never reaches consensus"));
    let er = Mixing::build(&GraphSpec::ErdosRenyi { p: 0.01, seed: 3 }, 8);
    assert!(er.expect_err("disconnected").0.contains("change the seed"));
    assert!(Mixing::build(&GraphSpec::ErdosRenyi { p: 0.0, seed: 3 }, 8).is_err());
    assert!(Mixing::build(&GraphSpec::ErdosRenyi { p: 1.0, seed: 3 }, 8).is_ok());
}
