//! Everything a site does before it sends anything (docs/design/federation.md "Site client"):
//! read the study and check that it can be joined, load and clip the data, and then join with
//! the site's public keys, checking that the study joined is the one described.

use std::time::Duration;

use reqwest::StatusCode;

use super::args::{DataFormat, SiteArgs};
use super::data::load_records;
use super::http::{HttpError, SiteClient};
use super::ledger::stated_budget;
use super::prepared::{Cost, Prepared, relation};
use super::roster::parse_expected;
use super::{Failure, progress};
use crate::dataset::Relation;
use crate::federation::messages::{JoinRequest, SiteStudyView};
use crate::privacy::units::{DeltaUnits, RhoUnits};
use crate::protocols::{StudyAlgorithm, StudyProtocol};
use crate::store::{SiteStatus, StudyStatus};

/// Whether the study can be joined (or, by this site restarted, continued) now.
fn check_study(view: &SiteStudyView) -> Result<(), Failure> {
    match view.status {
        // A site that already joined may be this site restarted (every study protocol is
        // durable): its ledger decides (`check_ledger` refuses unless it keeps this study's
        // session).
        StudyStatus::Enrolling | StudyStatus::Running => Ok(()),
        StudyStatus::Failed | StudyStatus::Cancelled => Err(Failure::Study(format!(
            "the study is {}; nothing was sent",
            view.status.as_str()
        ))),
        other => Err(Failure::Refused(format!(
            "the study is {}: it no longer takes sites in; nothing was sent",
            other.as_str()
        ))),
    }
}

fn study_cost(view: &SiteStudyView) -> Result<Cost, Failure> {
    let bad =
        |what: &str, value: f64| Failure::Protocol(format!("the study's cost {what} = {value} is not valid"));
    let rho_units = RhoUnits::checked_charge(view.cost_rho)
        .ok()
        .filter(|units| units.0 > 0)
        .ok_or_else(|| bad("rho", view.cost_rho))?;
    let delta_units =
        DeltaUnits::checked_charge(view.cost_delta).map_err(|_| bad("delta", view.cost_delta))?;
    Ok(Cost {
        rho_units,
        delta_units,
    })
}

/// Whether two descriptions of a study agree on everything but the statuses: what the site
/// joined must be what it checked.
fn same_terms(joined: &SiteStudyView, checked: &SiteStudyView) -> bool {
    let joined = SiteStudyView {
        status: checked.status,
        site_status: checked.site_status,
        ..joined.clone()
    };
    joined == *checked
}

/// Refuses a `federated_power` threshold t ≤ S/2 unless the operator allowed it: a lying
/// coordinator could then tell two disjoint groups of t sites different survivor sets and
/// collect both secrets of one site, and against a coalition of the coordinator with the other
/// sites this site's release carries noise variance (mΔ)²/t only.
/// The threshold rule of a `federated_power` site that tolerates up to `colluding` sites
/// colluding with a coordinator that lies (docs/design/federation.md, "The consistency round"):
/// t > c always (else the colluders alone hold t shares of this site's secrets), and
/// 2t − c > S, i.e. t ≥ `transcript::quorum(S, c)` (with c = 0: a majority), unless the
/// operator passes `--allow-minority-threshold`; the site still asks for a quorum of
/// confirmations before it reveals anything, whatever t is.
pub(crate) fn check_threshold(
    threshold: u32,
    sites: u32,
    colluding: u32,
    allow_minority: bool,
) -> Result<(), Failure> {
    if threshold <= colluding || colluding >= sites {
        return Err(Failure::Refused(format!(
            "the study's threshold t = {threshold} is not above the {colluding} colluding sites this site              tolerates (--colluding-sites) among {sites}: they alone could hold t shares of its secrets;              nothing was sent"
        )));
    }
    let quorum = crate::federation::transcript::quorum(sites, colluding);
    if threshold >= quorum {
        return Ok(());
    }
    if allow_minority {
        progress(&format!(
            "warning: threshold {threshold} of {sites} sites is not a majority (allowed by \
             --allow-minority-threshold)"
        ));
        return Ok(());
    }
    Err(Failure::Refused(format!(
        "the study's threshold t = {threshold} is below {quorum}, the least t with 2t − c > S for its {sites} \
         sites and c = {colluding} colluding: a coalition of the coordinator with the other sites would see \
         this site's release with noise variance (mΔ)²/t only; pass --allow-minority-threshold to take part \
         anyway (the site still waits for {quorum} confirmations of each round before it reveals anything); \
         nothing was sent"
    )))
}

/// Prints what the site learned of the study before anything is checked.
fn announce(view: &SiteStudyView) {
    progress(&format!(
        "study {:?} ({}): {}, {} sites, threshold {}, {} features, {}; status {}, this site ({:?}, index {}) {}",
        view.study_name,
        view.study_id,
        view.algorithm,
        view.n_sites,
        view.threshold,
        view.n_features,
        view.relation.as_str(),
        view.status.as_str(),
        view.site_name,
        view.site_index,
        view.site_status.as_str(),
    ));
}

/// Everything before joining: the study's view checked, its protocol, the loaded data and the
/// study's cost in ledger units.
pub(crate) async fn prepare(
    args: &SiteArgs,
    client: &SiteClient,
) -> Result<(&'static dyn StudyProtocol, Prepared), Failure> {
    let format = DataFormat::resolve(args.format, &args.data).map_err(Failure::Refused)?;
    stated_budget(args)?;
    if !args.data.is_file() {
        return Err(Failure::Refused(format!(
            "{} is not a readable file",
            args.data.display()
        )));
    }
    let view: SiteStudyView = client.get("/v1/site/study", Duration::ZERO).await?;
    announce(&view);
    check_study(&view)?;
    let expected_roster = args
        .expect_roster_hash
        .as_deref()
        .map(parse_expected)
        .transpose()
        .map_err(Failure::Refused)?;
    let Some(study) = StudyAlgorithm::from_name(&view.algorithm) else {
        return Err(Failure::Refused(format!(
            "this client does not know the study algorithm `{}`; nothing was sent",
            view.algorithm
        )));
    };
    let protocol = study.protocol();
    let computation = protocol.site_check(&view, args)?;
    let cost = study_cost(&view)?;
    let relation = relation(&view)?;
    let rules = protocol.site_records(&view, relation)?;
    let (beta, alpha) = (rules.beta, rules.alpha);
    let records = load_records(
        &args.data,
        format.ingest_format(),
        beta,
        alpha,
        rules.max_records,
        rules.empty_d,
    )
    .map_err(Failure::Refused)?;
    if rules.clamps && records.n as u64 > view.max_site_samples {
        progress(&format!(
            "warning: the data holds more records than the study's max_site_samples = {}; this site's \
             products are clamped to the study's bound, which may bias its contribution (shown here only)",
            view.max_site_samples
        ));
    }
    protocol
        .check_data(&view, computation.as_ref(), (records.n, records.d))
        .map_err(|e| Failure::Refused(format!("{}: {e}", args.data.display())))?;
    progress(&format!(
        "loaded {} records of {} features from {}, clipped to L2 norm {} and L1 norm {}",
        records.n,
        records.d,
        args.data.display(),
        beta,
        alpha
    ));
    Ok((
        protocol,
        Prepared {
            view,
            computation,
            records,
            cost,
            expected_roster,
        },
    ))
}

/// The public keys a site joins with (base64).
#[derive(Default)]
pub(crate) struct JoinKeys {
    /// `federated_power`: the share boxes' encryption key.
    pub(crate) encryption: Option<String>,
    /// One masking (or CAPE pair-noise) key per round or stage.
    pub(crate) mask: Vec<String>,
    /// `federated_power`: the verifying key of its round signatures.
    pub(crate) signing: Option<String>,
    /// `federated_power` under SecAgg+: the commitment to its share of the graph seed.
    pub(crate) seed_commitment: Option<String>,
}

/// Joins the study with this site's public keys.
pub(crate) async fn join(
    client: &SiteClient,
    view: &SiteStudyView,
    n: usize,
    keys: JoinKeys,
) -> Result<(), Failure> {
    let request = JoinRequest {
        // n is public under replace_one only.
        n_samples: (relation(view)? == Relation::ReplaceOne).then_some(n as u64),
        encryption_public_key: keys.encryption,
        mask_public_keys: keys.mask,
        signing_public_key: keys.signing,
        seed_commitment: keys.seed_commitment,
    };
    let joined: SiteStudyView = match client.post_for("/v1/site/join", &request).await {
        Ok(joined) => joined,
        Err((
            HttpError::Protocol {
                status: Some(StatusCode::CONFLICT),
                message,
                ..
            },
            true,
        )) => {
            // The join was sent more than once: the conflict may answer our own first attempt.
            let now: SiteStudyView = client.get("/v1/site/study", Duration::ZERO).await?;
            if now.site_status == SiteStatus::Invited {
                return Err(Failure::Protocol(format!(
                    "the server refused the join: {message}"
                )));
            }
            progress(&format!(
                "the join was sent twice (network); the server has this site as {}",
                now.site_status.as_str()
            ));
            now
        }
        Err((e, _)) => return Err(Failure::Protocol(format!("the server refused the join: {e}"))),
    };
    if !same_terms(&joined, view) {
        return Err(Failure::Protocol(
            "the study the server joined this site to differs from the one it described before".to_owned(),
        ));
    }
    progress(&format!(
        "joined as site {} of {} (threshold {})",
        view.site_index, view.n_sites, view.threshold
    ));
    Ok(())
}

#[cfg(test)]
#[path = "prepare_tests.rs"]
mod tests;
