//! Studies (multi-site runs) and their sites: creation with one token per site (stored
//! hashed), the lifecycle transitions the hub makes, the coordinator's record of each site's
//! charge, and results (docs/design/federation.md). Tenant-facing reads are scoped by tenant;
//! site-facing reads go through the site token.

use chrono::{DateTime, Utc};
use sqlx::{AnyConnection, Row};
use uuid::Uuid;

use super::codec::{basis_to_bytes, id, now, parse_id, parse_json, ts};
use super::study_rows::{
    SITE_COLUMNS, STUDY_COLUMNS, StudyRecord, StudySiteRecord, site_row, sites_of, study_by_id, study_row,
};
use super::tenants::{key_hash, new_secret};
use super::{Store, StoreError};
use crate::dataset::Relation;
use crate::privacy::units::{DeltaUnits, RhoUnits};

/// Prefix of every site token.
pub const SITE_TOKEN_PREFIX: &str = "pps_";

pub use crate::federation::status::{SiteStatus, StudyStatus};

/// A site to invite.
#[derive(Debug, Clone)]
pub struct NewStudySite {
    pub name: String,
    /// The coordinator-side budget of this site in ρ units, when one was stated.
    pub budget_rho_units: Option<RhoUnits>,
}

/// A study to create. Everything is validated by the caller; the schema re-checks ranges.
#[derive(Debug, Clone)]
pub struct NewStudy {
    pub name: String,
    pub algorithm: String,
    pub n_features: usize,
    pub relation: Relation,
    pub row_norm_bound: f64,
    pub row_l1_bound: Option<f64>,
    pub params: serde_json::Value,
    pub config: serde_json::Value,
    pub privacy: serde_json::Value,
    pub cost_rho_units: RhoUnits,
    pub cost_delta_units: DeltaUnits,
    pub threshold: u32,
    pub join_deadline: DateTime<Utc>,
    pub round_timeout_ms: i64,
    pub rounds: u32,
    pub sites: Vec<NewStudySite>,
}

/// A succeeded study's result.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyResult {
    pub d: usize,
    pub k: usize,
    /// Column-major d×k.
    pub basis: Vec<f64>,
    pub eigenvalues: Option<Vec<f64>>,
    pub report: Option<serde_json::Value>,
}

/// What cancelling a study did.
#[derive(Debug, Clone, PartialEq)]
pub enum StudyCancel {
    NotFound,
    Cancelled(StudyRecord),
    AlreadyFinished(StudyRecord),
}

impl Store {
    /// Creates a study and its sites; returns it with each site's token (shown once, stored
    /// hashed), in site order.
    pub async fn create_study(
        &self,
        tenant: Uuid,
        new: NewStudy,
    ) -> Result<(StudyRecord, Vec<StudySiteRecord>, Vec<String>), StoreError> {
        super::error::text_without_nul("name", &new.name)?;
        for site in &new.sites {
            super::error::text_without_nul("sites.name", &site.name)?;
        }
        let study = Uuid::new_v4();
        let at = now();
        let mut tokens = Vec::with_capacity(new.sites.len());
        let mut tx = self.write_tx().await?;
        sqlx::query(
            "INSERT INTO studies (id, tenant_id, name, algorithm, n_features, relation, row_norm_bound, row_l1_bound, \
                 params, config, privacy, cost_rho_units, cost_delta_units, threshold, n_sites, join_deadline, \
                 round_timeout_ms, status, progress_total, created_at, coordinator, coordinator_lease_until) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, 'enrolling', $18, $19, \
                 $20, $21)",
        )
        .bind(id(study))
        .bind(id(tenant))
        .bind(&new.name)
        .bind(&new.algorithm)
        .bind(i64::try_from(new.n_features).map_err(|_| StoreError::InvalidDataset("n_features".into()))?)
        .bind(new.relation.as_str())
        .bind(new.row_norm_bound)
        .bind(new.row_l1_bound)
        .bind(serde_json::to_string(&new.params)?)
        .bind(serde_json::to_string(&new.config)?)
        .bind(serde_json::to_string(&new.privacy)?)
        .bind(new.cost_rho_units.0)
        .bind(new.cost_delta_units.0)
        .bind(i64::from(new.threshold))
        .bind(new.sites.len() as i64)
        .bind(ts(new.join_deadline))
        .bind(new.round_timeout_ms)
        .bind(i64::from(new.rounds))
        .bind(ts(at))
        .bind(self.replica())
        .bind(ts(self.lease_end(at)))
        .execute(&mut *tx)
        .await?;
        for (i, site) in new.sites.iter().enumerate() {
            let token = new_secret(SITE_TOKEN_PREFIX)?;
            sqlx::query(
                "INSERT INTO study_sites (study_id, idx, name, token_hash, status, budget_rho_units) \
                 VALUES ($1, $2, $3, $4, 'invited', $5)",
            )
            .bind(id(study))
            .bind(i as i64 + 1)
            .bind(&site.name)
            .bind(key_hash(&token))
            .bind(site.budget_rho_units.map(|u| u.0))
            .execute(&mut *tx)
            .await?;
            tokens.push(token);
        }
        super::study_log::append_study_budget(&mut tx, study).await?;
        let record = study_by_id(&mut tx, study)
            .await?
            .ok_or_else(|| StoreError::Corrupt("the new study vanished".into()))?;
        let sites = sites_of(&mut tx, study).await?;
        tx.commit().await?;
        Ok((record, sites, tokens))
    }

    /// The tenant's study with its sites, or `None`.
    pub async fn get_study(
        &self,
        tenant: Uuid,
        study: Uuid,
    ) -> Result<Option<(StudyRecord, Vec<StudySiteRecord>)>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        match study_by_id(&mut conn, study).await? {
            Some(s) if s.tenant_id == tenant => {
                let sites = sites_of(&mut conn, study).await?;
                Ok(Some((s, sites)))
            }
            _ => Ok(None),
        }
    }

    /// Any tenant's study with its sites (for the hub).
    pub async fn get_study_any(
        &self,
        study: Uuid,
    ) -> Result<Option<(StudyRecord, Vec<StudySiteRecord>)>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        match study_by_id(&mut conn, study).await? {
            Some(s) => {
                let sites = sites_of(&mut conn, study).await?;
                Ok(Some((s, sites)))
            }
            None => Ok(None),
        }
    }

    /// The tenant's studies, oldest first.
    pub async fn list_studies(&self, tenant: Uuid) -> Result<Vec<StudyRecord>, StoreError> {
        let sql = format!("SELECT {STUDY_COLUMNS} FROM studies WHERE tenant_id = $1 ORDER BY seq");
        let rows = sqlx::query(&sql).bind(id(tenant)).fetch_all(&self.pool).await?;
        rows.iter().map(study_row).collect()
    }

    /// The study and site a site token belongs to, or `None` for an unknown token.
    pub async fn site_by_token(
        &self,
        token: &str,
    ) -> Result<Option<(StudyRecord, StudySiteRecord)>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let sql = format!("SELECT {SITE_COLUMNS} FROM study_sites WHERE token_hash = $1");
        let Some(row) = sqlx::query(&sql)
            .bind(key_hash(token))
            .fetch_optional(&mut *conn)
            .await?
        else {
            return Ok(None);
        };
        let site = site_row(&row)?;
        let study = study_by_id(&mut conn, site.study_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt("a site without its study".into()))?;
        Ok(Some((study, site)))
    }

    /// The study and site index a site token names, or `None` for an unknown token: one
    /// indexed read the first time, then from memory. That is sound because the pair is fixed
    /// for good: a token is made with its site, names that one site of that one study, and no
    /// site row is ever deleted or given another token. Everything that does change (the
    /// study's phase, the site's status) is the study hub's to check. Site requests of a
    /// running study (tasks, contributions, unmask answers: four per site per round) take this
    /// path instead of [`Store::site_by_token`]'s two reads and full records
    /// (docs/performance-federation.md).
    pub async fn site_identity_by_token(&self, token: &str) -> Result<Option<(Uuid, u32)>, StoreError> {
        /// Tokens kept in memory at most; past that the map starts again (it only saves reads).
        const MAX_CACHED: usize = 1 << 16;
        let hash = key_hash(token);
        if let Some(found) = self.site_tokens_cache().get(&hash) {
            return Ok(Some(*found));
        }
        let Some(row) = sqlx::query("SELECT study_id, idx FROM study_sites WHERE token_hash = $1")
            .bind(&hash)
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        let study = parse_id(row.try_get("study_id")?)?;
        let idx: i64 = row.try_get("idx")?;
        let index = u32::try_from(idx).map_err(|_| StoreError::Corrupt(format!("site index {idx}")))?;
        let mut cache = self.site_tokens_cache();
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(hash, (study, index));
        Ok(Some((study, index)))
    }

    fn site_tokens_cache(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, (Uuid, u32)>> {
        self.site_tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Ends an unfinished study as failed (or cancelled) with `error`; charges stand.
    pub async fn end_study(
        &self,
        study: Uuid,
        status: StudyStatus,
        error: &str,
        report: Option<&serde_json::Value>,
    ) -> Result<bool, StoreError> {
        let mut conn = self.pool.acquire().await?;
        end_in(&mut conn, study, status, error, report).await
    }

    /// Cancels the tenant's study if it is not finished.
    pub async fn cancel_study(&self, tenant: Uuid, study: Uuid) -> Result<StudyCancel, StoreError> {
        let Some((record, _)) = self.get_study(tenant, study).await? else {
            return Ok(StudyCancel::NotFound);
        };
        if record.status.is_terminal() {
            return Ok(StudyCancel::AlreadyFinished(record));
        }
        let reason = "cancelled by the study's owner";
        self.end_study(study, StudyStatus::Cancelled, reason, None)
            .await?;
        let (record, _) = self
            .get_study(tenant, study)
            .await?
            .ok_or_else(|| StoreError::Corrupt("a cancelled study vanished".into()))?;
        if record.status == StudyStatus::Cancelled {
            Ok(StudyCancel::Cancelled(record))
        } else {
            Ok(StudyCancel::AlreadyFinished(record))
        }
    }

    /// At start: the unfinished studies this replica coordinated whose protocol state is not
    /// kept in the database (CAPE studies; see `study_state.rs` for the durable ones) lost it
    /// with the process, so they fail at once (charges stand; nothing is rerun); so do those
    /// without a coordinator lease (written by a version without leases). Returns how many.
    pub async fn fail_interrupted_studies(&self) -> Result<u64, StoreError> {
        self.fail_studies(
            "the coordinator restarted while the study was ",
            "(coordinator = $2 OR coordinator_lease_until IS NULL)",
            self.replica(),
        )
        .await
    }

    /// The reaper's part for studies: an unfinished study without durable state whose
    /// coordinator (another replica) stopped renewing its lease fails; charges stand (durable
    /// ones are claimed and continued instead). Returns how many.
    pub async fn reap_expired_studies(&self) -> Result<u64, StoreError> {
        let at = ts(self.lease_now());
        self.fail_studies(
            "the coordinating replica stopped while the study was ",
            "coordinator_lease_until < $2",
            &at,
        )
        .await
    }

    async fn fail_studies(&self, why: &str, which: &str, arg: &str) -> Result<u64, StoreError> {
        let sql = format!(
            "UPDATE studies SET status = 'failed', finished_at = $1, \
                 error = $3 || status || \
                         '; its protocol state is not kept across restarts. Charges made stand; create a new study.' \
             WHERE status IN ('enrolling', 'running') AND {which} \
               AND NOT EXISTS (SELECT 1 FROM study_states t WHERE t.study_id = studies.id)"
        );
        let done = sqlx::query(&sql)
            .bind(ts(now()))
            .bind(arg)
            .bind(why)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    /// The result of the tenant's succeeded study.
    pub async fn study_result(&self, tenant: Uuid, study: Uuid) -> Result<Option<StudyResult>, StoreError> {
        let row = super::lookup::succeeded_result(&self.pool, "studies", "report", tenant, study).await?;
        let Some(row) = row else { return Ok(None) };
        let result = super::rows::basis_result(&row, &format!("study {study}"))?;
        let report: Option<&str> = row.try_get("report")?;
        Ok(Some(StudyResult {
            d: result.d,
            k: result.k,
            basis: result.basis,
            eigenvalues: result.eigenvalues,
            report: report.map(parse_json).transpose()?,
        }))
    }
}

/// Marks an invited site of an enrolling study as joined (a [`super::StudyWrite::Join`], kept with
/// the study's snapshot): false, and nothing changes, unless the site is still invited and the
/// study enrolling.
pub(super) async fn join_in(
    conn: &mut AnyConnection,
    study: Uuid,
    index: u32,
    n_samples: Option<i64>,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE study_sites SET status = 'joined', joined_at = $1, n_samples = $2 \
         WHERE study_id = $3 AND idx = $4 AND status = 'invited' \
           AND EXISTS (SELECT 1 FROM studies WHERE id = $5 AND status = 'enrolling')",
    )
    .bind(ts(now()))
    .bind(n_samples)
    .bind(id(study))
    .bind(i64::from(index))
    .bind(id(study))
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Enrolment is over: the study runs with `roster`; every other site is dropped (round 0).
/// On `conn`, inside the caller's transaction.
pub(super) async fn start_in(
    conn: &mut AnyConnection,
    study: Uuid,
    roster: &[u32],
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE studies SET status = 'running', started_at = $1 WHERE id = $2 AND status = 'enrolling'",
    )
    .bind(ts(now()))
    .bind(id(study))
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() != 1 {
        return Ok(false);
    }
    for site in sites_of(conn, study).await? {
        if !roster.contains(&site.index) {
            set_site(conn, study, site.index, SiteStatus::Dropped, Some(0)).await?;
        }
    }
    Ok(true)
}

/// Round 1 opens: every site of `roster` is charged the study's cost (the coordinator's record)
/// and becomes `contributing`; a site's stated budget is enforced by the schema, and charges
/// stand from here on. On `conn`, inside the caller's transaction: a site is charged
/// only while `charged_at` is NULL, so a repeated charge changes nothing.
pub(super) async fn charge_in(
    conn: &mut AnyConnection,
    study: Uuid,
    roster: &[u32],
) -> Result<(), StoreError> {
    let at = ts(now());
    let mut charged = Vec::with_capacity(roster.len());
    for &site in roster {
        let done = sqlx::query(
            "UPDATE study_sites SET status = 'contributing', charged_at = $1, \
                 charged_rho_units = (SELECT cost_rho_units FROM studies WHERE id = $2), \
                 charged_delta_units = (SELECT cost_delta_units FROM studies WHERE id = $2) \
             WHERE study_id = $2 AND idx = $3 AND charged_at IS NULL",
        )
        .bind(&at)
        .bind(id(study))
        .bind(i64::from(site))
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() == 1 {
            charged.push(site);
        }
    }
    // The charge's leaf in the same transaction (a repeated charge charges nobody and logs nothing).
    if !charged.is_empty() {
        super::study_log::append_study_charge(conn, study, charged).await?;
    }
    Ok(())
}

/// Rounds done so far, on `conn`. Progress never goes back: a repeated (older)
/// progress write changes nothing.
pub(super) async fn progress_in(conn: &mut AnyConnection, study: Uuid, done: u32) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE studies SET progress_done = $1 WHERE id = $2 AND status = 'running' AND progress_done < $1",
    )
    .bind(i64::from(done))
    .bind(id(study))
    .execute(conn)
    .await?;
    Ok(())
}

/// Stores the result; the study succeeds and its contributing sites are done. On `conn`, inside
/// the caller's transaction: the basis is d×k.
pub(super) async fn finish_in(
    conn: &mut AnyConnection,
    study: Uuid,
    (d, k, basis): (usize, usize, &[f64]),
    eigenvalues: Option<&[f64]>,
    report: &serde_json::Value,
) -> Result<(), StoreError> {
    if d.checked_mul(k) != Some(basis.len()) {
        return Err(StoreError::InvalidResult(format!(
            "basis of {} values is not {d}×{k}",
            basis.len()
        )));
    }
    sqlx::query(
        "UPDATE studies SET status = 'succeeded', finished_at = $1, progress_done = progress_total, \
             result = $2, result_d = $3, result_k = $4, eigenvalues = $5, report = $6 \
         WHERE id = $7 AND status = 'running'",
    )
    .bind(ts(now()))
    .bind(basis_to_bytes(basis))
    .bind(d as i64)
    .bind(k as i64)
    .bind(eigenvalues.map(serde_json::to_string).transpose()?)
    .bind(serde_json::to_string(report)?)
    .bind(id(study))
    .execute(&mut *conn)
    .await?;
    sqlx::query("UPDATE study_sites SET status = 'done' WHERE study_id = $1 AND status = 'contributing'")
        .bind(id(study))
        .execute(conn)
        .await?;
    Ok(())
}

/// [`Store::end_study`] on `conn`.
pub(super) async fn end_in(
    conn: &mut AnyConnection,
    study: Uuid,
    status: StudyStatus,
    error: &str,
    report: Option<&serde_json::Value>,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE studies SET status = $1, error = $2, finished_at = $3, report = COALESCE($4, report) \
         WHERE id = $5 AND status IN ('enrolling', 'running')",
    )
    .bind(status.as_str())
    .bind(error)
    .bind(ts(now()))
    .bind(report.map(serde_json::to_string).transpose()?)
    .bind(id(study))
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Sets one site's status (and the round it dropped in), on `conn`.
pub(super) async fn set_site(
    conn: &mut AnyConnection,
    study: Uuid,
    index: u32,
    status: SiteStatus,
    dropped_round: Option<i64>,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE study_sites SET status = $1, dropped_round = COALESCE($2, dropped_round) WHERE study_id = $3 AND idx = $4")
        .bind(status.as_str())
        .bind(dropped_round)
        .bind(id(study))
        .bind(i64::from(index))
        .execute(conn)
        .await?;
    Ok(())
}
