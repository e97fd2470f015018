#!/usr/bin/env python3
"""An independent accounting oracle for the ledger's admission rule (docs/design/privacy.md §2.6).

Random sequences of Gaussian, Laplace, exponential-mechanism and approximate (ε, δ) charges
are sent, one JSON line each, to `admission_oracle` (examples/admission_oracle.rs, which calls
`privpca::privacy::admission::admit` itself). For every sequence, the charges the ledger
admitted are composed by Google's `dp_accounting` privacy-loss-distribution (PLD) accountant,
and the composed ε at the dataset's δ must stay within the dataset's ε:

    ε_PLD(δ_budget) ≤ ε_budget + tolerance.

What each charge is, as a concrete mechanism the ledger claims to cover:

- Gaussian of zCDP cost ρ: sensitivity 1, noise sd 1/sqrt(2ρ) — what `GaussianDpEvent` with that
  noise multiplier composes (`PLD.from_gaussian_mechanism`).
- Laplace, ε-DP: scale 1/ε — `LaplaceDpEvent` (`PLD.from_laplace_mechanism`).
- Exponential mechanism with parameter ε: an ε-bounded-range mechanism, which the ledger
  charges ε²/8 (Cesar & Rogers 2021). `dp_accounting` has no event for it. Dong, Durfee &
  Rogers (2020) show that for each pair of neighbours an ε-BR mechanism is dominated by a
  two-outcome "generalised randomised response" whose privacy loss takes the values t and
  t − ε for some t ∈ [0, ε]; each such pair is itself an ε-BR mechanism, so the ledger must
  cover it. We compose that pair exactly (`from_two_probability_mass_functions`) at
  t = ε/2 (which is randomised response at ε/2, the symmetric case that reaches ε²/8 in the
  zCDP limit) and at t = ε/4 (with its reverse pair, t = 3ε/4, in the other direction).
  Modelling the EM as a plain ε-DP mechanism (randomised response at ε, a 2ε-BR mechanism
  with KL ≈ ε²/2) would be looser than the ε²/8 the ledger charges, so a failure there
  would not be a ledger bug; this choice keeps the check meaningful: every mechanism composed
  here is one the ledger's charge is a valid zCDP bound for.
- Approximate (ε, δ)-DP subroutine (a stability histogram), charged δ-approximate ε²/2-zCDP:
  the worst (ε, δ)-DP pair (`PLD.from_privacy_parameters`: privacy loss +∞ with probability δ,
  randomised response at ε otherwise), which is δ-approximately ε-DP and so covered by the
  charge. Its δ goes against the ledger's fixed cap δ/10 on approximate parts (the δ-cap
  path); the generator draws δ_j of 0.5–6 % of the budget's δ, so that a few of them exceed
  the cap and are refused.

Tolerance: the PLDs are built with pessimistic rounding (an upper bound on the true curve) on
a grid of ε_budget/4000 in privacy loss; each composed mechanism can move ε up by at most one
grid step, so we allow one grid step per admitted charge (at most 0.25 % of ε) plus 1e-9.

Also checked, more tightly: a Gaussian-only sequence is covered by the exact curve at δ/2
(the union bound's first half), ε_PLD(δ/2) ≤ ε, and any other sequence by CKS at
δ/2 − δ/10 plus the δ its approximate parts spent, ε_PLD(0.4·δ + Σδ_j) ≤ ε. Exits non-zero on
any violation.
"""

import json
import math
import random
import subprocess
import sys
import time

from dp_accounting import dp_event
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.pld import privacy_loss_distribution as pld

SEED = 20_261_126
SEQUENCES = 1000
GRID = 1e-4
# The loss grid relative to the budget's ε: privacy losses scale with ε, so this keeps the
# number of buckets (and the run time) about the same for every budget.
GRID_PER_EPSILON = 1.0 / 4000.0


def br_pair(epsilon, t):
    """Log pmfs of the generalised randomised response with privacy loss in {t, t - ε}."""
    p = math.expm1(epsilon - t) / (math.exp(epsilon - t) - math.exp(-t))
    upper = {0: math.log(p), 1: math.log1p(-p)}
    lower = {0: math.log(p) - t, 1: math.log1p(-p) + epsilon - t}
    return upper, lower


def em_pld(epsilon, t, grid=GRID):
    upper, lower = br_pair(epsilon, t)
    return pld.from_two_probability_mass_functions(
        lower, upper, pessimistic_estimate=True, value_discretization_interval=grid
    )


def charge_pld(charge, t_fraction, grid):
    kind = charge["kind"]
    if kind == "gaussian":
        return pld.from_gaussian_mechanism(
            standard_deviation=1.0 / math.sqrt(2.0 * charge["rho"]),
            value_discretization_interval=grid,
        )
    if kind == "laplace":
        return pld.from_laplace_mechanism(1.0 / charge["epsilon"], value_discretization_interval=grid)
    if kind == "approximate":
        return pld.from_privacy_parameters(
            pld_common.DifferentialPrivacyParameters(charge["epsilon"], charge["delta"]),
            value_discretization_interval=grid,
        )
    return em_pld(charge["epsilon"], t_fraction * charge["epsilon"], grid)


def composed_epsilons(charges, deltas, t_fraction, grid=GRID):
    """ε at each δ of `deltas` for the composition, EMs taken at t = t_fraction·ε."""
    total = None
    for charge in charges:
        one = charge_pld(charge, t_fraction, grid)
        total = one if total is None else total.compose(one)
    return [total.get_epsilon_for_delta(d) for d in deltas]


def epsilon_pld(charges, deltas, grid=GRID):
    """The largest ε at each δ over the EM directions tried (t = ε/2; t = ε/4 and its reverse)."""
    fractions = [0.5] if all(c["kind"] != "exponential" for c in charges) else [0.5, 0.25, 0.75]
    results = [composed_epsilons(charges, deltas, f, grid) for f in fractions]
    return [max(r[i] for r in results) for i in range(len(deltas))]


def random_sequence(rng):
    epsilon = math.exp(rng.uniform(math.log(0.1), math.log(4.0)))
    delta = 10.0 ** rng.uniform(-9.0, -3.0)
    # A rough capacity (the Bun–Steinke inverse, a little above), so that charges reach the boundary.
    log_inv = math.log(1.0 / delta)
    cap = 1.3 * (math.sqrt(log_inv + epsilon) - math.sqrt(log_inv)) ** 2
    charges = []
    for _ in range(rng.randint(1, 10)):
        share = rng.uniform(0.02, 0.6) * cap
        kind = rng.choices(["gaussian", "laplace", "exponential", "approximate"], weights=[3, 1, 1, 1])[0]
        if kind == "gaussian":
            charges.append({"kind": kind, "rho": share})
        elif kind == "laplace":
            charges.append({"kind": kind, "epsilon": math.sqrt(2.0 * share)})
        elif kind == "approximate":
            # δ_j of 0.5–6 % of δ against a cap of 10 %: a sequence with several of them
            # reaches the cap and has some refused.
            charges.append({"kind": kind, "epsilon": math.sqrt(2.0 * share),
                            "delta": rng.uniform(0.005, 0.06) * delta})
        else:
            charges.append({"kind": kind, "epsilon": math.sqrt(8.0 * share)})
    return {"epsilon": epsilon, "delta": delta, "charges": charges}


def self_check():
    """The direct PLD construction equals what dp_accounting's accountant composes for the events."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=GRID)
    acc.compose(dp_event.ComposedDpEvent([
        dp_event.GaussianDpEvent(1.0 / math.sqrt(2.0 * 0.01)),
        dp_event.LaplaceDpEvent(1.0 / 0.1),
    ]))
    ours = composed_epsilons([{"kind": "gaussian", "rho": 0.01}, {"kind": "laplace", "epsilon": 0.1}], [1e-5], 0.5)[0]
    theirs = acc.get_epsilon(1e-5)
    assert abs(ours - theirs) <= 1e-9, (ours, theirs)
    # Randomised response at ε/2 is the BR pair at t = ε/2.
    rr = pld.from_randomized_response(2.0 / (1.0 + math.exp(0.5)), 2, value_discretization_interval=GRID)
    assert abs(rr.get_epsilon_for_delta(1e-6) - em_pld(1.0, 0.5).get_epsilon_for_delta(1e-6)) <= 2 * GRID


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: accounting_oracle.py PATH/TO/admission_oracle")
    self_check()
    rng = random.Random(SEED)
    sequences = [random_sequence(rng) for _ in range(SEQUENCES)]
    started = time.time()
    proc = subprocess.run(
        [sys.argv[1]],
        input="".join(json.dumps(s) + "\n" for s in sequences),
        capture_output=True,
        text=True,
        check=True,
    )
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(answers) == len(sequences), "one answer per sequence"

    rows = {"gaussian-only": [0, 0, 0.0, 0.0], "mixed": [0, 0, 0.0, 0.0]}
    approximate = [0, 0]  # approximate charges sent, and refused
    failures = []
    refused_some = 0
    for seq, answer in zip(sequences, answers):
        kept = [c for c, ok in zip(seq["charges"], answer["admitted"]) if ok]
        refused_some += not all(answer["admitted"])
        for c, ok in zip(seq["charges"], answer["admitted"]):
            if c["kind"] == "approximate":
                approximate[0] += 1
                approximate[1] += not ok
        gaussian_only = all(c["kind"] == "gaussian" for c in kept)
        row = rows["gaussian-only" if gaussian_only else "mixed"]
        row[0] += 1
        if not kept:
            continue
        row[1] += 1
        eps, delta = seq["epsilon"], seq["delta"]
        grid = eps * GRID_PER_EPSILON
        tol = grid * len(kept) + 1e-9
        # At the budget's δ, and at the union bound's own share for this kind of sequence:
        # the exact curve at δ/2, or CKS at δ/2 − δ/10 plus the δ approximate parts spent
        # (at most the cap δ/10).
        spent = sum(c["delta"] for c in kept if c["kind"] == "approximate")
        own_delta = delta * 0.5 if gaussian_only else delta * 0.4 + spent
        whole, own = epsilon_pld(kept, [delta, own_delta], grid)
        row[2] = max(row[2], whole / eps)
        row[3] = max(row[3], own / eps)
        if whole > eps + tol or own > eps + tol:
            failures.append((seq, kept, whole, own))
    elapsed = time.time() - started

    print(f"accounting oracle: dp-accounting PLD vs privpca::privacy::admission (seed {SEED}, {elapsed:.0f} s)")
    print(f"{'sequences':<16}{'count':>7}{'admitted':>10}{'max ε_PLD(δ)/ε':>17}{'max ε_PLD(own δ)/ε':>21}")
    total, admitted = 0, 0
    for name, (count, adm, ratio, own) in rows.items():
        total += count
        admitted += adm
        print(f"{name:<16}{count:>7}{adm:>10}{ratio:>17.4f}{own:>21.4f}")
    print(f"{'all':<16}{total:>7}{admitted:>10}   (sequences with a refused charge: {refused_some})")
    print(f"approximate (ε, δ) charges: {approximate[0]} sent, {approximate[1]} refused")
    if failures:
        for seq, kept, whole, own in failures[:5]:
            print(f"VIOLATION: budget ({seq['epsilon']}, {seq['delta']:e}), admitted {kept}: "
                  f"ε_PLD(δ) = {whole}, ε_PLD(own δ) = {own}", file=sys.stderr)
        print(f"oracle: {admitted - len(failures)} passed, {len(failures)} failed", file=sys.stderr)
        sys.exit(1)
    print(f"oracle: {admitted} passed, 0 failed")


if __name__ == "__main__":
    main()
