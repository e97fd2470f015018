//! The site's local ledger (docs/design/federation.md "Site client"): the budget stated on the
//! command line, the check that a study fits it before anything is sent, and the one charge
//! per study, made before the first noisy value is drawn.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

use super::args::SiteArgs;
use super::data::Records;
use super::prepared::{Cost, Prepared, relation};
use super::{Failure, progress};
use crate::federation::messages::SiteStudyView;
use crate::privacy::units::{DeltaUnits, RhoUnits};
use crate::store::{
    ChargeOutcome, LocalBudget, LocalDataset, SiteMessageKind, SiteSession, SiteStatus, Store, StoreError,
    StudyStatus,
};

/// ρ and δ in ledger units, for the operator.
pub(crate) fn amounts(rho_units: RhoUnits, delta_units: DeltaUnits) -> String {
    format!("rho = {}, delta = {}", rho_units.to_real(), delta_units.to_real())
}

/// The budget stated on the command line, in ledger units (budgets round down).
pub(crate) fn stated_budget(args: &SiteArgs) -> Result<(RhoUnits, DeltaUnits), Failure> {
    let rho = RhoUnits::checked_budget(args.budget_rho)
        .ok()
        .filter(|units| units.0 > 0)
        .ok_or_else(|| {
            Failure::Refused(format!(
                "--budget-rho must be > 0 and at most 1e6; got {}",
                args.budget_rho
            ))
        })?;
    let delta = DeltaUnits::checked_budget(args.budget_delta).map_err(|_| {
        Failure::Refused(format!(
            "--budget-delta must lie in [0, 1); got {}",
            args.budget_delta
        ))
    })?;
    Ok((rho, delta))
}

/// Opens the ledger, creates or checks its budget, and checks that the study fits it.
pub(crate) async fn check_ledger(
    args: &SiteArgs,
    view: &SiteStudyView,
    records: &Records,
    cost: Cost,
) -> Result<(Store, LocalBudget), Failure> {
    let path = args.ledger.display();
    let (budget_rho, budget_delta) = stated_budget(args)?;
    let store = Store::open_ledger(&args.ledger)
        .await
        .map_err(|e| Failure::Refused(format!("cannot open the ledger {path}: {e}")))?;
    let name = args.data.file_name().map_or_else(
        || args.data.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let data = LocalDataset {
        name,
        relation: relation(view)?,
        row_norm_bound: view.row_norm_bound,
        row_l1_bound: Some(view.row_l1_bound),
        n: records.n as u64,
        d: records.d as u64,
    };
    let budget = match store.ensure_local_budget(budget_rho, budget_delta, &data).await {
        Ok(budget) => budget,
        Err(e) => {
            store.close().await;
            return Err(Failure::Refused(format!("ledger {path}: {e}")));
        }
    };
    let resuming = match resumable(args, view, &store).await {
        Ok(resuming) => resuming,
        Err(e) => {
            store.close().await;
            return Err(e);
        }
    };
    let refusal = refusal(&store, view, &budget, cost, resuming, &path.to_string()).await;
    if let Some(message) = refusal {
        store.close().await;
        return Err(Failure::Refused(message));
    }
    if resuming {
        progress(&format!(
            "ledger {path} keeps this site's session of study {}: continuing it",
            view.study_id
        ));
    }
    progress(&format!(
        "ledger {path}{}: {} left of {}; this study costs {}",
        if budget.created { " (created)" } else { "" },
        amounts(budget.remaining_rho_units(), budget.remaining_delta_units()),
        amounts(budget.budget_rho_units, budget.budget_delta_units),
        amounts(cost.rho_units, cost.delta_units),
    ));
    Ok((store, budget))
}

/// Why this site must not take part, if it must not: the ledger cannot be read, the study no
/// longer takes it in and the ledger keeps no session to continue, the ledger was charged for
/// this study already (and is not resuming it), or the study costs more than is left.
async fn refusal(
    store: &Store,
    view: &SiteStudyView,
    budget: &LocalBudget,
    cost: Cost,
    resuming: bool,
    path: &str,
) -> Option<String> {
    match store.study_charged(budget.dataset, view.study_id).await {
        Err(e) => Some(format!("ledger {path}: {e}")),
        Ok(_)
            if !resuming
                && (view.site_status != SiteStatus::Invited || view.status != StudyStatus::Enrolling) =>
        {
            Some(format!(
                "this site's status is {} and the study is {}: it no longer takes this site in, and \
                 ledger {path} keeps no session of study {} to continue; nothing was sent",
                view.site_status.as_str(),
                view.status.as_str(),
                view.study_id
            ))
        }
        Ok(true) if resuming => None,
        Ok(true) => Some(format!(
            "ledger {path} was already charged for study {}: the data it protects takes part in a \
             study once; nothing was sent",
            view.study_id
        )),
        Ok(false) if !budget.fits(cost.rho_units, cost.delta_units) => Some(format!(
            "the study costs {} but ledger {path} has {} left (of {}); nothing was sent",
            amounts(cost.rho_units, cost.delta_units),
            amounts(budget.remaining_rho_units(), budget.remaining_delta_units()),
            amounts(budget.budget_rho_units, budget.budget_delta_units),
        )),
        Ok(false) => None,
    }
}

/// Charges the study to the local ledger (once per study), before any noisy value is sent.
pub(crate) async fn charge_ledger(
    args: &SiteArgs,
    store: &Store,
    budget: &LocalBudget,
    prepared: &Prepared,
) -> Result<(), Failure> {
    let view = &prepared.view;
    let cost = prepared.cost;
    let path = args.ledger.display();
    let outcome = store
        .charge_study(
            budget.dataset,
            view.study_id,
            &view.algorithm,
            cost.rho_units,
            cost.delta_units,
        )
        .await
        .map_err(|e| Failure::Refused(format!("ledger {path}: {e}; nothing was sent")))?;
    match outcome {
        ChargeOutcome::Charged(after) => {
            progress(&format!(
                "charged {} to ledger {path} ({} left)",
                amounts(cost.rho_units, cost.delta_units),
                amounts(after.remaining_rho_units(), after.remaining_delta_units())
            ));
            Ok(())
        }
        ChargeOutcome::AlreadyCharged => Err(Failure::Refused(format!(
            "ledger {path} was already charged for study {} (by another client?): the data it \
             protects takes part in a study once; nothing was sent",
            view.study_id
        ))),
        ChargeOutcome::OverBudget {
            remaining_rho_units,
            remaining_delta_units,
        } => Err(Failure::Refused(format!(
            "the study costs {} but ledger {path} has only {} left now; nothing was sent",
            amounts(cost.rho_units, cost.delta_units),
            amounts(remaining_rho_units, remaining_delta_units)
        ))),
    }
}

/// The fingerprint of what a site takes part in a study with: the data file's bytes, its
/// format, the stated budget, the study and the site. A restarted site must give the same
/// (docs/design/federation.md, "Durable studies").
pub(crate) fn fingerprint(args: &SiteArgs, view: &SiteStudyView) -> Result<String, Failure> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    let mut file = std::fs::File::open(&args.data)
        .map_err(|e| Failure::Refused(format!("cannot read {}: {e}", args.data.display())))?;
    std::io::copy(&mut file, &mut hasher)
        .map_err(|e| Failure::Refused(format!("cannot read {}: {e}", args.data.display())))?;
    hasher.update(
        format!(
            "\0privpca site session v1\0format={:?}\0rho={:016x}\0delta={:016x}\0study={}\0site={}",
            args.format,
            args.budget_rho.to_bits(),
            args.budget_delta.to_bits(),
            view.study_id,
            view.site_index
        )
        .as_bytes(),
    );
    Ok(hex::encode(hasher.finalize()))
}

/// Whether the ledger keeps this study's session, started with the same data and parameters:
/// then this is the site restarted, and it continues. A session started with anything else is
/// refused before anything is sent.
async fn resumable(args: &SiteArgs, view: &SiteStudyView, store: &Store) -> Result<bool, Failure> {
    let path = args.ledger.display();
    let kept = store
        .site_session(view.study_id)
        .await
        .map_err(|e| Failure::Refused(format!("ledger {path}: {e}")))?;
    let Some(kept) = kept else { return Ok(false) };
    if kept.fingerprint != fingerprint(args, view)? {
        return Err(Failure::Refused(format!(
            "ledger {path} keeps a session of study {} started with another data file, format or \
             budget than this command line's; a site continues a study only with what it joined \
             with; nothing was sent",
            view.study_id
        )));
    }
    Ok(true)
}

pub(crate) fn ledger_failure(e: impl std::fmt::Display) -> Failure {
    Failure::Refused(format!("the ledger: {e}; nothing more is sent"))
}

/// Keeps `body` for (`kind`, `round`) before it is sent, and returns what must be sent: the
/// message kept first, if one was (a phase is answered once, with the same bytes).
pub(crate) async fn keep<T: Serialize + for<'de> Deserialize<'de>>(
    store: &Store,
    study: uuid::Uuid,
    kind: SiteMessageKind,
    round: u32,
    body: &T,
) -> Result<T, Failure> {
    let text = serde_json::to_string(body).map_err(ledger_failure)?;
    let kept = store
        .keep_site_message(study, kind, round, &text)
        .await
        .map_err(ledger_failure)?;
    serde_json::from_str(&kept).map_err(ledger_failure)
}

pub(crate) fn parse_kept<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, Failure> {
    serde_json::from_str(text).map_err(|e| ledger_failure(StoreError::Corrupt(e.to_string())))
}

/// Starts this site's session of the study in its ledger, or takes up the one it keeps (the
/// site restarted): a fresh 32-byte secret seed is kept, with the fingerprint of what the site
/// takes part with, before anything is sent, and every key of the study derives from the kept
/// seed, so a restarted site has the same keys. A session kept with another fingerprint is
/// refused. Returns an OS-seeded generator for the noise, and the kept seed.
pub(crate) async fn start_session(
    args: &SiteArgs,
    view: &SiteStudyView,
    store: &Store,
) -> Result<(ChaCha20Rng, [u8; 32]), Failure> {
    let mut rng = ChaCha20Rng::try_from_os_rng()
        .map_err(|e| Failure::Refused(format!("the operating system's random generator failed: {e}")))?;
    let mut fresh = [0u8; 32];
    rng.fill_bytes(&mut fresh);
    let wanted = SiteSession {
        secret_seed: fresh,
        fingerprint: fingerprint(args, view)?,
    };
    let kept = store
        .start_site_session(view.study_id, &wanted)
        .await
        .map_err(ledger_failure)?;
    if kept.fingerprint != wanted.fingerprint {
        return Err(Failure::Refused(
            "the ledger keeps this study's session with another data file or budget; nothing was sent".into(),
        ));
    }
    Ok((rng, kept.secret_seed))
}

/// The site's signing key for a study (docs/design/federation.md, "The consistency round"),
/// derived from its kept session seed on ChaCha20 stream 2, apart from `federated_power`'s keys
/// (stream 0) and shares (stream 1) and gossip's exchanges (streams 2³² + t): a restarted site
/// signs with the same key.
pub(crate) fn signer_of(seed: [u8; 32]) -> crate::federation::transcript::SiteSigner {
    let mut rng = ChaCha20Rng::from_seed(seed);
    rng.set_stream(2);
    let mut bytes = [0u8; 32];
    rng.fill_bytes(&mut bytes);
    crate::federation::transcript::SiteSigner::from_seed(bytes)
}
