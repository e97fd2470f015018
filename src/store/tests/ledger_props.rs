//! Property: whatever sequence of submissions, cancellations, claims and endings happens, the
//! store admits exactly what an exact model admits, spending never exceeds the budget, and
//! spending always equals Σ charges − Σ refunds (docs/design/privacy.md §2).

use proptest::prelude::*;

use super::{fixture, held, job, ledger_net, private_spec};
use crate::store::{CancelOutcome, JobStatus, SubmitOutcome};

const BUDGET_RHO: i64 = 1_000;
const BUDGET_DELTA: i64 = 6;

#[derive(Debug, Clone)]
enum Op {
    Submit { dataset: usize, rho: i64, delta: i64 },
    Cancel(usize),
    Claim,
    Finish { pick: usize, honour_cancel: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2usize, 0..=400i64, 0..=2i64).prop_map(|(dataset, rho, delta)| Op::Submit { dataset, rho, delta }),
        2 => any::<prop::sample::Index>().prop_map(|i| Op::Cancel(i.index(usize::MAX))),
        2 => Just(Op::Claim),
        1 => (any::<prop::sample::Index>(), any::<bool>())
            .prop_map(|(i, honour_cancel)| Op::Finish { pick: i.index(usize::MAX), honour_cancel }),
    ]
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let f = fixture().await;
    let mut datasets = Vec::new();
    for _ in 0..2 {
        datasets.push(f.ready(private_spec(BUDGET_RHO, BUDGET_DELTA)).await.id);
    }
    let mut model = [(0i64, 0i64); 2];
    let mut jobs = Vec::new(); // (job id, dataset index, rho, delta)
    let mut running = Vec::new();
    for op in ops {
        match op {
            Op::Submit { dataset, rho, delta } => {
                let fits = model[dataset].0 + rho <= BUDGET_RHO && model[dataset].1 + delta <= BUDGET_DELTA;
                let outcome = f
                    .store
                    .submit_job(f.tenant, job(datasets[dataset], rho, delta))
                    .await;
                match outcome.map_err(|e| TestCaseError::fail(e.to_string()))? {
                    SubmitOutcome::Created(j) => {
                        prop_assert!(fits, "admitted a charge that does not fit");
                        model[dataset].0 += rho;
                        model[dataset].1 += delta;
                        jobs.push((j.id, dataset, rho, delta));
                    }
                    SubmitOutcome::OverBudget { .. } => prop_assert!(!fits, "refused a charge that fits"),
                    other => prop_assert!(false, "unexpected {:?}", other),
                }
            }
            Op::Cancel(pick) if !jobs.is_empty() => {
                let (id, dataset, rho, delta) = jobs[pick % jobs.len()];
                let outcome = f
                    .store
                    .cancel_job(f.tenant, id)
                    .await
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                if let CancelOutcome::Refunded(_) = outcome {
                    model[dataset].0 -= rho;
                    model[dataset].1 -= delta;
                }
            }
            Op::Claim => {
                if let Some(j) = f
                    .store
                    .claim_next_job()
                    .await
                    .map_err(|e| TestCaseError::fail(e.to_string()))?
                {
                    running.push(j.id);
                }
            }
            Op::Finish { pick, honour_cancel } if !running.is_empty() => {
                let id = running.swap_remove(pick % running.len());
                let done = if honour_cancel {
                    f.store.mark_cancelled(held(id)).await
                } else {
                    f.store.fail_job(held(id), "stopped").await
                };
                done.map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            Op::Cancel(_) | Op::Finish { .. } => {}
        }
        for (i, &id) in datasets.iter().enumerate() {
            let ds = f
                .store
                .get_dataset(f.tenant, id)
                .await
                .ok()
                .flatten()
                .ok_or(TestCaseError::fail("dataset"))?;
            prop_assert!(ds.spent_rho_units.0 <= BUDGET_RHO && ds.spent_delta_units.0 <= BUDGET_DELTA);
            prop_assert_eq!((ds.spent_rho_units.0, ds.spent_delta_units.0), model[i]);
            prop_assert_eq!(ledger_net(&f.store, f.tenant, id).await, model[i]);
        }
    }
    // Cancelling a queued job ends it at once: no queued job carries a cancellation request.
    for (id, ..) in &jobs {
        let j = f
            .store
            .get_job_any(*id)
            .await
            .ok()
            .flatten()
            .ok_or(TestCaseError::fail("job"))?;
        prop_assert!(j.status != JobStatus::Queued || !j.cancel_requested);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn spending_never_exceeds_the_budget_and_matches_the_ledger(ops in prop::collection::vec(op(), 1..40)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        runtime.block_on(run(ops))?;
    }
}
