//! Admission under both kinds of budget, with the worked case and a property test that
//! no admitted sequence breaks the owner's stated (ε, δ).

use proptest::prelude::*;

use super::*;
use crate::privacy::Cost;
use crate::privacy::gaussian_curve::max_gaussian_rho;
use crate::privacy::units::{DeltaUnits, RhoUnits};

fn eps_delta(epsilon: f64, delta: f64) -> Budget {
    Budget::EpsilonDelta { epsilon, delta }
}

fn gaussian(rho: f64) -> Spending {
    Spending::of_cost(&Cost::gaussian_zcdp(rho))
}

#[test]
fn gaussian_jobs_fit_by_the_exact_curve_at_half_the_delta() {
    // (ε, δ) = (1, 1e-5): Gaussian-only totals up to 0.0331 (the exact curve at δ/2; it was
    // 0.0359 at the whole δ, which the union bound of privacy.md §2.6 no longer allows).
    let budget = eps_delta(1.0, 1e-5);
    let mut spent = Spending::default();
    for _ in 0..3 {
        assert_eq!(admit(&budget, spent, gaussian(0.011)), Some(Rule::ExactGaussian));
        spent = spent.checked_add(gaussian(0.011)).unwrap();
    }
    // 0.033 ≤ 0.0331, 0.034 is not: the old rule admitted up to 0.0359.
    assert_eq!(admit(&budget, spent, gaussian(0.0003)), None);
    assert_eq!(admit(&budget, spent, gaussian(0.0001)), Some(Rule::ExactGaussian));
    // Mixed totals: CKS at δ/2 − δ/10 = 4e-6, capacity 0.0278 (was 0.0306 at δ).
    let two = gaussian(0.011).checked_add(gaussian(0.011)).unwrap();
    let laplace = Spending::of_cost(&Cost::pure(0.1)); // ρ = 0.005, total 0.027 ≤ 0.0278
    assert_eq!(admit(&budget, two, laplace), Some(Rule::Cks));
    let laplace = Spending::of_cost(&Cost::pure(0.11)); // ρ = 0.00605, total 0.02805
    assert_eq!(admit(&budget, two, laplace), None);
}

#[test]
fn capacity_follows_the_rule_in_force() {
    let budget = eps_delta(1.0, 1e-5);
    let gauss = rho_capacity_units(&budget, Spending::default());
    assert_eq!(gauss.0 / 100_000_000, 331); // 0.0331…
    let mixed = Spending::of_cost(&Cost::pure(0.01));
    let cks = rho_capacity_units(&budget, mixed);
    assert_eq!(cks.0 / 100_000_000, 277); // 0.0277…, CKS at 4e-6
    // Spending δ does not lower the CKS capacity (its cap is fixed), but δ beyond the cap is refused.
    let approx = Spending::of_cost(&Cost::approximate(0.01, 5e-7));
    assert_eq!(rho_capacity_units(&budget, approx), cks);
    let over = Spending::of_cost(&Cost::approximate(0.01, 1.1e-6));
    assert_eq!(rho_capacity_units(&budget, over), RhoUnits::ZERO);
    assert_eq!(delta_capacity_units(&budget), DeltaUnits::charge(1e-6));
    let zcdp = Budget::Zcdp {
        rho_units: RhoUnits(42),
        delta_units: DeltaUnits(0),
    };
    assert_eq!(rho_capacity_units(&zcdp, Spending::default()), RhoUnits(42));
}

#[test]
fn capacities_at_a_few_targets() {
    // (ε, δ, Gaussian-only, mixed) capacities in units of 1e-5, rounded down (docs/design/privacy.md §2.6).
    for (epsilon, delta, gauss, mixed) in [
        (1.0, 1e-5, 3314, 2776),
        (0.5, 1e-6, 717, 610),
        (2.0, 1e-5, 11700, 9929),
        (1.0, 1e-3, 6532, 5031),
    ] {
        let budget = eps_delta(epsilon, delta);
        let g = rho_capacity_units(&budget, Spending::default()).0 / 10_000_000;
        let m = rho_capacity_units(&budget, Spending::of_cost(&Cost::pure(1e-6))).0 / 10_000_000;
        assert!(
            (g - gauss).abs() <= 1 && (m - mixed).abs() <= 1,
            "({epsilon}, {delta}): {g} {m}"
        );
    }
}

#[test]
fn an_old_dataset_above_the_new_capacity_admits_nothing_more() {
    // Spent 0.0357 under the old rule (exact curve at the whole δ): no further charge, and the
    // capacity the view subtracts from is below the spending (the store clamps at 0).
    let budget = eps_delta(1.0, 1e-5);
    let spent = gaussian(0.0357);
    assert_eq!(admit(&budget, spent, gaussian(1e-6)), None);
    assert!(rho_capacity_units(&budget, spent) < spent.rho_units);
}

#[test]
fn delta_charges_need_delta_left() {
    let budget = eps_delta(10.0, 1e-5);
    // The approximate parts may spend δ/10 in all.
    let k_dp = Spending::of_cost(&Cost::approximate(1.0, 1.01e-6));
    assert_eq!(admit(&budget, Spending::default(), k_dp), None);
    let k_dp = Spending::of_cost(&Cost::approximate(1.0, 1e-6));
    assert_eq!(admit(&budget, Spending::default(), k_dp), Some(Rule::Cks));
    assert_eq!(
        admit(&budget, k_dp, Spending::of_cost(&Cost::approximate(0.1, 1e-18))),
        None
    );
    // zCDP budgets keep their δ cap.
    let zcdp = Budget::Zcdp {
        rho_units: RhoUnits::charge(1.0),
        delta_units: DeltaUnits::charge(1e-6),
    };
    let k_dp = Spending::of_cost(&Cost::approximate(1.0, 5e-6));
    assert_eq!(admit(&zcdp, Spending::default(), k_dp), None);
    let small = Spending::of_cost(&Cost::approximate(1.0, 1e-6));
    assert_eq!(admit(&zcdp, Spending::default(), small), Some(Rule::Zcdp));
}

/// CKS 2020 (Prop. 12 form) by brute force over a log grid of orders a: independent of the
/// golden-section search the service uses (any a > 1 gives a valid bound, so the grid minimum
/// is an upper bound on the true ε, and the check below is sound).
fn cks_grid(rho: f64, delta: f64) -> f64 {
    let l = -delta.ln();
    let objective = |x: f64| {
        let a = 1.0 + 10f64.powf(x);
        a * rho + (l + (a - 1.0) * (1.0 - 1.0 / a).ln() - a.ln()) / (a - 1.0)
    };
    // A coarse log grid of a − 1 over [1e-6, 1e6], then a fine one around its best point.
    let step = 12.0 / 4000.0;
    let coarse = (0..=4000).map(|i| -6.0 + step * i as f64);
    let best = coarse.fold((f64::INFINITY, 0.0), |(v, x0), x| {
        let fx = objective(x);
        if fx < v { (fx, x) } else { (v, x0) }
    });
    (0..=4000)
        .map(|i| best.1 - step + 2.0 * step * i as f64 / 4000.0)
        .map(objective)
        .fold(best.0, f64::min)
}

/// Φ by the complementary error function of the C library's algorithm family, evaluated in
/// a second way: the Abramowitz–Stegun-free continued fraction is overkill here, so we take
/// erfc from libm but evaluate δ at the real (unrounded) total without the rounding nudges.
fn exact_delta(epsilon: f64, rho: f64) -> f64 {
    let mu = (2.0 * rho).sqrt();
    let phi = |x: f64| 0.5 * libm::erfc(-x / std::f64::consts::SQRT_2);
    phi(-epsilon / mu + mu / 2.0) - epsilon.exp() * phi(-epsilon / mu - mu / 2.0)
}

#[derive(Debug, Clone, Copy)]
enum Job {
    Gaussian(f64),
    Laplace(f64),
    Approximate(f64, f64),
}

fn job_strategy() -> impl Strategy<Value = Job> {
    prop_oneof![
        4 => (1e-5_f64..0.02).prop_map(Job::Gaussian),
        1 => (1e-3_f64..0.2).prop_map(Job::Laplace),
        1 => ((1e-3_f64..0.2), (1e-8_f64..3e-6)).prop_map(|(e, d)| Job::Approximate(e, d)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// No sequence the ledger admits violates the stated (ε, δ): a Gaussian-only sequence is
    /// checked against the exact curve at its real total, any other against CKS (by brute
    /// force) at δ minus the approximate δ spent. Charges are the real, unrounded costs.
    #[test]
    fn admitted_sequences_keep_the_stated_guarantee(
        epsilon in 0.1_f64..4.0,
        log_delta in -9.0_f64..-3.0,
        jobs in proptest::collection::vec(job_strategy(), 1..40),
    ) {
        let delta = 10f64.powf(log_delta);
        let budget = eps_delta(epsilon, delta);
        let mut spent = Spending::default();
        let mut total = Cost::ZERO;
        for job in jobs {
            let cost = match job {
                Job::Gaussian(rho) => Cost::gaussian_zcdp(rho),
                Job::Laplace(eps) => Cost::pure(eps),
                Job::Approximate(eps, d) => Cost::approximate(eps, d),
            };
            let charge = Spending::of_cost(&cost);
            if admit(&budget, spent, charge).is_some() {
                spent = spent.checked_add(charge).unwrap();
                total = total.then(cost);
            }
        }
        if total.rho == 0.0 {
            return Ok(());
        }
        if total.is_gaussian_only() {
            let d = exact_delta(epsilon, total.rho);
            prop_assert!(d <= delta * (1.0 + 1e-9), "exact δ {d} > {delta} at Σρ = {}", total.rho);
        } else {
            let left = delta - total.delta;
            prop_assert!(left > 0.0);
            let e = cks_grid(total.rho, left).min(total.rho + 2.0 * (total.rho * -left.ln()).sqrt());
            prop_assert!(e <= epsilon * (1.0 + 1e-6), "CKS ε {e} > {epsilon} at Σρ = {}", total.rho);
        }
    }
}

// ---- Adaptive strategies: branching trees of charges (privacy.md §2.6, the union bound) ----

/// One charge of a strategy tree: its kind and real cost. `parent` is an earlier node (or the
/// root, 0): the analyst's next request depends on what it saw there.
#[derive(Debug, Clone, Copy)]
struct Node {
    parent: usize,
    cost: Cost,
}

/// A tree whose first release costs `first` and whose paths then branch, each branch one more
/// release costing one of `branches`.
fn branching<const N: usize>(first: Cost, branches: [Cost; N]) -> Vec<Node> {
    let root = Node {
        parent: 0,
        cost: first,
    };
    let children = branches.into_iter().map(|cost| Node { parent: 1, cost });
    std::iter::once(root).chain(children).collect()
}

/// A final transcript's real totals.
#[derive(Debug, Clone, Copy)]
struct Leaf {
    total: Cost,
}

/// Plays a strategy tree against a rule: each node's charge is admitted or refused given the
/// spending on its own path, and the analyst goes on either way. Returns every leaf's totals.
fn play(nodes: &[Node], rule: impl Fn(Spending, Spending) -> bool) -> Vec<Leaf> {
    // Index 0 is the root (nothing spent); node i of `nodes` is index i + 1.
    let mut spent = vec![(Spending::default(), Cost::ZERO)];
    let mut has_child = vec![false; nodes.len() + 1];
    for node in nodes {
        let (units, real) = spent[node.parent];
        has_child[node.parent] = true;
        let charge = Spending::of_cost(&node.cost);
        spent.push(if rule(units, charge) {
            (units.checked_add(charge).unwrap(), real.then(node.cost))
        } else {
            (units, real)
        });
    }
    (0..spent.len())
        .filter(|&i| !has_child[i])
        .map(|i| Leaf { total: spent[i].1 })
        .collect()
}

/// The smallest δ' at which the brute-force CKS bound of ρ is ≤ ε (1 if none below 1).
fn cks_delta(rho: f64, epsilon: f64) -> f64 {
    if rho == 0.0 {
        return 0.0;
    }
    let ok = |d: f64| cks_grid(rho, d).min(rho + 2.0 * (rho * -d.ln()).sqrt()) <= epsilon;
    let (mut lo, mut hi) = (-700.0_f64, 0.0_f64); // ln δ'
    if !ok(hi.exp() * 0.999_999) {
        return 1.0;
    }
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if ok(mid.exp()) { hi = mid } else { lo = mid }
    }
    hi.exp()
}

/// Whether some union-bound certificate proves the tree (ε, δ)-DP: a threshold c splits the
/// leaves into A = Gaussian-only leaves with Σρ > c (a Gaussian-DP filter: δ_A = the exact
/// curve at their largest Σρ) and B = the rest (a zCDP filter with fixed caps: δ_B = the CKS δ
/// of their largest Σρ plus their largest Σδ_j; or the exact curve if B is Gaussian-only), and
/// δ_A + δ_B ≤ δ. Every threshold gives a valid proof, so all leaf values are tried.
fn certified(leaves: &[Leaf], epsilon: f64, delta: f64) -> bool {
    let tol = 1.0 + 1e-6;
    let mut thresholds: Vec<f64> = leaves
        .iter()
        .filter(|l| l.total.is_gaussian_only())
        .map(|l| l.total.rho)
        .collect();
    thresholds.push(f64::INFINITY);
    thresholds.push(-1.0);
    thresholds.iter().any(|&c| {
        let in_a = |l: &&Leaf| l.total.is_gaussian_only() && l.total.rho > c;
        let rho_a = leaves
            .iter()
            .filter(in_a)
            .map(|l| l.total.rho)
            .fold(0.0, f64::max);
        let b: Vec<&Leaf> = leaves.iter().filter(|l| !in_a(l)).collect();
        let rho_b = b.iter().map(|l| l.total.rho).fold(0.0, f64::max);
        let delta_b = b.iter().map(|l| l.total.delta).fold(0.0, f64::max);
        let delta_a = if rho_a > 0.0 {
            exact_delta(epsilon, rho_a)
        } else {
            0.0
        };
        let b_gaussian = b.iter().all(|l| l.total.is_gaussian_only());
        let conversion = if b_gaussian && rho_b > 0.0 {
            exact_delta(epsilon, rho_b).min(cks_delta(rho_b, epsilon))
        } else {
            cks_delta(rho_b, epsilon)
        };
        delta_a + conversion + delta_b <= delta * tol
    })
}

fn node_strategy(cap: f64, delta: f64) -> impl Strategy<Value = (f64, Cost)> {
    let fraction = 0.01_f64..0.7;
    prop_oneof![
        3 => (0.0_f64..1.0, fraction.clone()).prop_map(move |(p, f)| (p, Cost::gaussian_zcdp(f * cap))),
        1 => (0.0_f64..1.0, fraction.clone()).prop_map(move |(p, f)| (p, Cost::pure((2.0 * f * cap).sqrt()))),
        1 => (0.0_f64..1.0, fraction.clone())
            .prop_map(move |(p, f)| (p, Cost::exponential_mechanism((8.0 * f * cap).sqrt()))),
        1 => (0.0_f64..1.0, fraction, 0.0_f64..0.15)
            .prop_map(move |(p, f, g)| (p, Cost::approximate((2.0 * f * cap).sqrt(), g * delta))),
    ]
}

fn tree_strategy() -> impl Strategy<Value = (f64, f64, Vec<Node>)> {
    (0.1_f64..4.0, -9.0_f64..-3.0).prop_flat_map(|(epsilon, log_delta)| {
        let delta = 10f64.powf(log_delta);
        let cap = max_gaussian_rho(epsilon, delta);
        proptest::collection::vec(node_strategy(cap, delta), 1..24).prop_map(move |raw| {
            let nodes = raw
                .iter()
                .enumerate()
                .map(|(i, &(p, cost))| Node {
                    parent: ((p * (i + 1) as f64) as usize).min(i),
                    cost,
                })
                .collect();
            (epsilon, delta, nodes)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Every adaptive strategy (a random branching tree of Gaussian, Laplace,
    /// exponential-mechanism and approximate charges, each branch admitted step by step by
    /// `admit`) has a union-bound certificate over all its admitted leaves.
    #[test]
    fn adaptive_strategies_keep_the_stated_guarantee((epsilon, delta, nodes) in tree_strategy()) {
        let budget = eps_delta(epsilon, delta);
        let leaves = play(&nodes, |spent, charge| admit(&budget, spent, charge).is_some());
        prop_assert!(certified(&leaves, epsilon, delta), "no certificate: {leaves:?}");
    }
}

/// The rule before the union bound: exact curve at the whole δ for Gaussian-only totals,
/// else CKS at δ − Σδ_j.
fn old_rule(epsilon: f64, delta: f64, spent: Spending, charge: Spending) -> bool {
    let total = spent.checked_add(charge).unwrap();
    let rho = total.rho_units.to_real();
    if total.is_gaussian_only() && exact_delta(epsilon, rho) <= delta {
        return true;
    }
    let left = delta - total.delta_units.to_real();
    left > 0.0 && crate::privacy::rho_to_epsilon(rho, Delta::new(left).unwrap()) <= epsilon
}

#[test]
fn the_old_rule_fails_the_certificate_on_a_two_branch_tree() {
    // A small Gaussian release decides the branch: Gaussian-only up to the exact curve at the
    // whole δ on one side, a Laplace release up to CKS at the whole δ on the other. Each path
    // alone is (1, 1e-5)-DP; no split of δ covers both.
    let (epsilon, delta) = (1.0, 1e-5);
    let nodes = branching(
        Cost::gaussian_zcdp(1e-4),
        [Cost::gaussian_zcdp(0.0357), Cost::pure((2.0_f64 * 0.0300).sqrt())],
    );
    let old = play(&nodes, |s, c| old_rule(epsilon, delta, s, c));
    assert!(
        old.iter().all(|l| l.total.rho > 0.03),
        "both branches admitted: {old:?}"
    );
    assert!(!certified(&old, epsilon, delta));
    // The rule in force refuses the large charges and is certified.
    let budget = eps_delta(epsilon, delta);
    let new = play(&nodes, |s, c| admit(&budget, s, c).is_some());
    assert!(certified(&new, epsilon, delta));
}

#[test]
fn a_delta_cap_that_moves_with_each_path_fails_the_certificate() {
    // The union bound with "CKS at δ/2 − Σδ_j", Σδ_j taken per path: after a small Gaussian
    // release, one branch goes Gaussian-only to the exact curve at δ/2, one spends most of δ/2
    // on an approximate part, one the whole CKS capacity at δ/2. Each path is covered; the tree
    // is not (the approximate δ and the CKS δ of different paths add up).
    let (epsilon, delta) = (1.0, 1e-5);
    let moving = |spent: Spending, charge: Spending| {
        let total = spent.checked_add(charge).unwrap();
        let rho = total.rho_units.to_real();
        if total.is_gaussian_only() && exact_delta(epsilon, rho) <= delta / 2.0 {
            return true;
        }
        let left = delta / 2.0 - total.delta_units.to_real();
        left > 0.0 && crate::privacy::rho_to_epsilon(rho, Delta::new(left).unwrap()) <= epsilon
    };
    let nodes = branching(
        Cost::gaussian_zcdp(1e-5),
        [
            Cost::gaussian_zcdp(0.0330),
            Cost::approximate(0.01, 4.9e-6),
            Cost::pure((2.0_f64 * 0.0283).sqrt()),
        ],
    );
    let leaves = play(&nodes, moving);
    assert_eq!(leaves.len(), 3);
    assert!(leaves[0].total.rho > 0.033 && leaves[1].total.delta > 4e-6 && leaves[2].total.rho > 0.028);
    assert!(!certified(&leaves, epsilon, delta));
    // The fixed cap refuses the large approximate part and is certified.
    let budget = eps_delta(epsilon, delta);
    let fixed = play(&nodes, |s, c| admit(&budget, s, c).is_some());
    assert!(certified(&fixed, epsilon, delta));
}
