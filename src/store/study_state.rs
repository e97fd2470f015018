//! Durable study state (docs/design/federation.md, "Durable studies"): the coordinator's
//! snapshot of each unfinished study, written under a lease with a fence, and a site's own
//! study state in its local ledger.
//!
//! The lease is the study's `coordinator` and `coordinator_lease_until` (renewed by
//! [`Store::renew_study_lease`], under the epoch the replica claimed); the fence is
//! `coordinator_epoch`, bumped by every claim. [`Store::save_study_step`] writes the snapshot
//! and the step's store writes (charges, site status, progress, the end of the study) only
//! while the study is still this replica's under the epoch it claimed, all in the one
//! transaction that checks it, so a replica that lost its lease changes nothing from then on
//! ([`StoreError::StudyLeaseLost`]).

use sqlx::Row;
use uuid::Uuid;

use super::codec::{id, now, ts};
use super::studies::{charge_in, end_in, finish_in, join_in, progress_in, set_site, start_in};
use super::{SiteStatus, Store, StoreError, StudyStatus};

/// An unfinished study as claimed by this replica: the fence of every state write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StudyLease {
    pub study: Uuid,
    pub epoch: i64,
}

impl StudyLease {
    /// The lease of a study this replica has just created (created studies start at epoch 0,
    /// coordinated by their creator).
    pub fn created(study: Uuid) -> StudyLease {
        StudyLease { study, epoch: 0 }
    }
}

/// A store write of one step of a study, made in the transaction of the step's fenced snapshot
/// ([`Store::save_study_step`]). Each is idempotent: made again (by a replica that resumes the
/// study from the snapshot) it changes nothing.
#[derive(Clone, Copy, Debug)]
pub enum StudyWrite<'a> {
    /// The site joined (if it is still invited and the study enrolling).
    Join { site: u32, n_samples: Option<i64> },
    /// Enrolment is over: the study runs with `roster`; every other site is dropped (round 0).
    Start { roster: &'a [u32] },
    /// Round 1 opens: `roster` is charged (once), `dropped` is dropped in round 0.
    Charge { roster: &'a [u32], dropped: &'a [u32] },
    /// These sites dropped out in `round`.
    Dropped { sites: &'a [u32], round: u32 },
    /// `done` rounds are complete (progress never goes back).
    Progress { done: u32 },
    /// The study succeeded with this d×k basis.
    Succeeded {
        d: usize,
        k: usize,
        basis: &'a [f64],
        eigenvalues: Option<&'a [f64]>,
        report: &'a serde_json::Value,
    },
    /// The study failed; charges made stand.
    Failed {
        reason: &'a str,
        report: Option<&'a serde_json::Value>,
    },
}

impl StudyWrite<'_> {
    async fn apply(self, conn: &mut sqlx::AnyConnection, study: Uuid) -> Result<(), StoreError> {
        match self {
            StudyWrite::Join { site, n_samples } => {
                join_in(conn, study, site, n_samples).await?;
            }
            StudyWrite::Start { roster } => {
                start_in(conn, study, roster).await?;
            }
            StudyWrite::Charge { roster, dropped } => {
                for &site in dropped {
                    set_site(conn, study, site, SiteStatus::Dropped, Some(0)).await?;
                }
                charge_in(conn, study, roster).await?;
            }
            StudyWrite::Dropped { sites, round } => {
                for &site in sites {
                    set_site(conn, study, site, SiteStatus::Dropped, Some(i64::from(round))).await?;
                }
            }
            StudyWrite::Progress { done } => progress_in(conn, study, done).await?,
            StudyWrite::Succeeded {
                d,
                k,
                basis,
                eigenvalues,
                report,
            } => finish_in(conn, study, (d, k, basis), eigenvalues, report).await?,
            StudyWrite::Failed { reason, report } => {
                end_in(conn, study, StudyStatus::Failed, reason, report).await?;
            }
        }
        Ok(())
    }
}

/// A study's snapshot as [`Store::save_study_step`] writes it.
#[derive(Clone, Copy, Debug)]
pub struct StudySnapshot<'a> {
    pub state: &'a str,
    /// Journal entries the study accepted before this snapshot and that are not written yet:
    /// appended first, in this order.
    pub journal: &'a [String],
    /// Whether the snapshot holds all that the journal does: the journal is then emptied
    /// (and `journal` not written).
    pub supersedes_journal: bool,
}

impl<'a> StudySnapshot<'a> {
    /// A snapshot that holds the whole state (the journal is emptied).
    pub fn whole(state: &'a str) -> StudySnapshot<'a> {
        StudySnapshot {
            state,
            journal: &[],
            supersedes_journal: true,
        }
    }
}

/// What a site sent (or received) for one phase of a study, kept in its ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SiteMessageKind {
    /// The share boxes it dealt (round 0).
    Shares,
    /// The share boxes addressed to it (round 0).
    Inbox,
    /// A round's masked contribution.
    Contribution,
    /// A round's unmasking answer, with the sets it answered.
    Unmask,
    /// The one transcript of a round it accepted (and signed): a site confirms at most one per
    /// round, also across restarts.
    Confirm,
    /// SecAgg+: the roster it revealed its share of the graph seed for (round 0): it reveals
    /// for one roster only, also across restarts.
    Reveal,
}

impl SiteMessageKind {
    fn as_str(self) -> &'static str {
        match self {
            SiteMessageKind::Shares => "shares",
            SiteMessageKind::Inbox => "inbox",
            SiteMessageKind::Contribution => "contribution",
            SiteMessageKind::Unmask => "unmask",
            SiteMessageKind::Confirm => "confirm",
            SiteMessageKind::Reveal => "reveal",
        }
    }
}

/// A site's study session as kept in its ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteSession {
    /// The secret every key of the session derives from.
    pub secret_seed: [u8; 32],
    /// What the session was started with (data file and parameters).
    pub fingerprint: String,
}

const UNFINISHED: &str = "status IN ('enrolling', 'running')";

impl Store {
    /// Claims an unfinished study for this replica: possible when this replica coordinated it
    /// (it restarted), nobody does, or its coordinator's lease ran out. Bumps the fence, so the
    /// earlier holder can no longer write. None if the study is finished or another replica
    /// still holds it.
    pub async fn claim_study(&self, study: Uuid) -> Result<Option<StudyLease>, StoreError> {
        let sql = format!(
            "UPDATE studies SET coordinator = $1, coordinator_lease_until = $2, \
                 coordinator_epoch = coordinator_epoch + 1 \
             WHERE id = $3 AND {UNFINISHED} \
               AND (coordinator = $1 OR coordinator IS NULL OR coordinator_lease_until IS NULL \
                    OR coordinator_lease_until < $4) \
             RETURNING coordinator_epoch"
        );
        let row = sqlx::query(&sql)
            .bind(self.replica())
            .bind(ts(self.lease_end(self.lease_now())))
            .bind(id(study))
            .bind(ts(self.lease_now()))
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(row) => Some(StudyLease {
                study,
                epoch: row.try_get("coordinator_epoch")?,
            }),
            None => None,
        })
    }

    /// Writes the study's protocol snapshot, fenced (see [`Store::save_study_step`]).
    pub async fn save_study_state(&self, lease: StudyLease, state: &str) -> Result<(), StoreError> {
        self.save_study_step(lease, Some(StudySnapshot::whole(state)), &[])
            .await
    }

    /// One step of a study, fenced: only while the study is unfinished and still this
    /// replica's under `lease.epoch` (which also renews the lease), and in that one
    /// transaction, writes the snapshot `state` (if any: its journal entries first, or the
    /// journal emptied when it supersedes it), then the step's `writes`; a study that those
    /// writes finish loses its snapshot in the same transaction.
    /// [`StoreError::StudyLeaseLost`] otherwise, and nothing is written: the caller must stop
    /// driving the study. So a replica that lost its lease can neither charge, drop, advance,
    /// fail nor finish the study its successor now drives.
    pub async fn save_study_step(
        &self,
        lease: StudyLease,
        state: Option<StudySnapshot<'_>>,
        writes: &[StudyWrite<'_>],
    ) -> Result<(), StoreError> {
        // Synced: what a step decides (a stage's aggregator seeds, a round's roster and
        // dropouts, a charge) is sent to sites after this returns, so a power loss must not
        // let a resumed coordinator decide it again differently (docs/design/ledger.md,
        // "Durable before released").
        let mut tx = self.synced_write_tx().await?;
        if !self.hold(&mut tx, lease).await? {
            return Err(StoreError::StudyLeaseLost(lease.study));
        }
        if let Some(snapshot) = state {
            if snapshot.supersedes_journal {
                // The snapshot now holds what the journal held.
                sqlx::query("DELETE FROM study_journal WHERE study_id = $1")
                    .bind(id(lease.study))
                    .execute(&mut *tx)
                    .await?;
            } else {
                append_in(&mut tx, lease.study, snapshot.journal).await?;
            }
            sqlx::query(
                "INSERT INTO study_states (study_id, epoch, state, updated_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (study_id) DO UPDATE SET epoch = excluded.epoch, state = excluded.state, \
                     updated_at = excluded.updated_at",
            )
            .bind(id(lease.study))
            .bind(lease.epoch)
            .bind(snapshot.state)
            .bind(ts(now()))
            .execute(&mut *tx)
            .await?;
        }
        for write in writes {
            write.apply(&mut tx, lease.study).await?;
        }
        if !writes.is_empty() {
            drop_finished_state(&mut tx, lease.study).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Appends messages the study accepted to its journal (`study_journal`), in order, in one
    /// transaction fenced as [`Store::save_study_step`]: one row per message, of its own size,
    /// instead of the whole snapshot, so a round's messages cost what they hold, and the
    /// messages that arrived together cost one transaction. A resumed study replays the rows
    /// after its snapshot ([`Store::load_study_journal`]).
    pub async fn append_study_journal(
        &self,
        lease: StudyLease,
        entries: &[String],
    ) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        if !self.hold(&mut tx, lease).await? {
            return Err(StoreError::StudyLeaseLost(lease.study));
        }
        append_in(&mut tx, lease.study, entries).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The study's journal since its snapshot, oldest first.
    pub async fn load_study_journal(&self, study: Uuid) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT entry FROM study_journal WHERE study_id = $1 ORDER BY seq")
            .bind(id(study))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| row.try_get("entry").map_err(StoreError::from))
            .collect()
    }

    /// The coordinator's heartbeat for one study: pushes its lease forward, only while it is
    /// unfinished and still this replica's under `lease.epoch`. False otherwise: a replica
    /// whose claim was taken over (even by a process under its own name) can never renew it
    /// back, and must stop driving it.
    pub async fn renew_study_lease(&self, lease: StudyLease) -> Result<bool, StoreError> {
        let mut conn = self.pool.acquire().await?;
        self.hold(&mut conn, lease).await
    }

    /// Renews the study's lease if it is unfinished and still this replica's under
    /// `lease.epoch`; whether it was.
    async fn hold(&self, conn: &mut sqlx::AnyConnection, lease: StudyLease) -> Result<bool, StoreError> {
        let sql = format!(
            "UPDATE studies SET coordinator_lease_until = $1 \
             WHERE id = $2 AND coordinator = $3 AND coordinator_epoch = $4 AND {UNFINISHED}"
        );
        let done = sqlx::query(&sql)
            .bind(ts(self.lease_end(self.lease_now())))
            .bind(id(lease.study))
            .bind(self.replica())
            .bind(lease.epoch)
            .execute(conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The study's last snapshot, if one was written.
    pub async fn load_study_state(&self, study: Uuid) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT state FROM study_states WHERE study_id = $1")
            .bind(id(study))
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(row) => Some(row.try_get("state")?),
            None => None,
        })
    }

    /// Drops a finished study's snapshot (its masked vectors and relayed boxes are of no
    /// further use). Does nothing while the study is unfinished.
    pub async fn drop_study_state(&self, study: Uuid) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        drop_finished_state(&mut tx, study).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Unfinished studies with a snapshot that this replica may claim now: its own (it
    /// restarted) and those whose coordinator's lease ran out.
    pub async fn claimable_studies(&self) -> Result<Vec<Uuid>, StoreError> {
        let sql = format!(
            "SELECT s.id FROM studies s JOIN study_states t ON t.study_id = s.id \
             WHERE s.{UNFINISHED} AND (s.coordinator = $1 OR s.coordinator IS NULL \
                   OR s.coordinator_lease_until IS NULL OR s.coordinator_lease_until < $2) \
             ORDER BY s.seq"
        );
        let rows = sqlx::query(&sql)
            .bind(self.replica())
            .bind(ts(self.lease_now()))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let text: String = row.try_get("id")?;
                Uuid::parse_str(&text).map_err(|e| StoreError::Corrupt(format!("study id {text}: {e}")))
            })
            .collect()
    }

    /// A site's session for `study` in its ledger, if it started one.
    pub async fn site_session(&self, study: Uuid) -> Result<Option<SiteSession>, StoreError> {
        let row = sqlx::query("SELECT secret_seed, fingerprint FROM site_sessions WHERE study_id = $1")
            .bind(id(study))
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let seed: Vec<u8> = row.try_get("secret_seed")?;
        let secret_seed = <[u8; 32]>::try_from(seed.as_slice())
            .map_err(|_| StoreError::Corrupt(format!("the session seed of study {study} is not 32 bytes")))?;
        Ok(Some(SiteSession {
            secret_seed,
            fingerprint: row.try_get("fingerprint")?,
        }))
    }

    /// Starts a site's session for `study` (once; a second start keeps the first and returns
    /// it, so a restarted site always gets the same keys).
    pub async fn start_site_session(
        &self,
        study: Uuid,
        session: &SiteSession,
    ) -> Result<SiteSession, StoreError> {
        sqlx::query(
            "INSERT INTO site_sessions (study_id, secret_seed, fingerprint, created_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (study_id) DO NOTHING",
        )
        .bind(id(study))
        .bind(session.secret_seed.to_vec())
        .bind(&session.fingerprint)
        .bind(ts(now()))
        .execute(&self.pool)
        .await?;
        self.site_session(study)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("the session of study {study} vanished")))
    }

    /// What the site sent for (`kind`, `round`) of `study`, if anything.
    pub async fn site_message(
        &self,
        study: Uuid,
        kind: SiteMessageKind,
        round: u32,
    ) -> Result<Option<String>, StoreError> {
        let row =
            sqlx::query("SELECT body FROM site_messages WHERE study_id = $1 AND kind = $2 AND round = $3")
                .bind(id(study))
                .bind(kind.as_str())
                .bind(i64::from(round))
                .fetch_optional(&self.pool)
                .await?;
        Ok(match row {
            Some(row) => Some(row.try_get("body")?),
            None => None,
        })
    }

    /// Every (round, body) the site kept of `kind` for `study`, by round.
    pub async fn site_messages(
        &self,
        study: Uuid,
        kind: SiteMessageKind,
    ) -> Result<Vec<(u32, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT round, body FROM site_messages WHERE study_id = $1 AND kind = $2 ORDER BY round",
        )
        .bind(id(study))
        .bind(kind.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let round: i64 = row.try_get("round")?;
                let round =
                    u32::try_from(round).map_err(|_| StoreError::Corrupt(format!("round {round}")))?;
                Ok((round, row.try_get("body")?))
            })
            .collect()
    }

    /// Keeps what the site is about to send (before it sends it), once: a message already kept
    /// for (`kind`, `round`) is returned instead, and the caller must send that one.
    pub async fn keep_site_message(
        &self,
        study: Uuid,
        kind: SiteMessageKind,
        round: u32,
        body: &str,
    ) -> Result<String, StoreError> {
        sqlx::query(
            "INSERT INTO site_messages (study_id, kind, round, body, created_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (study_id, kind, round) DO NOTHING",
        )
        .bind(id(study))
        .bind(kind.as_str())
        .bind(i64::from(round))
        .bind(body)
        .bind(ts(now()))
        .execute(&self.pool)
        .await?;
        self.site_message(study, kind, round)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("a kept message of study {study} vanished")))
    }
}

/// Appends `entries` to the study's journal, in order.
async fn append_in(
    conn: &mut sqlx::AnyConnection,
    study: Uuid,
    entries: &[String],
) -> Result<(), StoreError> {
    for entry in entries {
        sqlx::query(
            "INSERT INTO study_journal (study_id, seq, entry) \
             SELECT $1, COALESCE(MAX(seq), 0) + 1, $2 FROM study_journal WHERE study_id = $1",
        )
        .bind(id(study))
        .bind(entry)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Deletes a study's snapshot and journal once it has ended (nothing while it is unfinished):
/// its masked vectors and relayed boxes are of no further use.
async fn drop_finished_state(conn: &mut sqlx::AnyConnection, study: Uuid) -> Result<(), StoreError> {
    for table in ["study_journal", "study_states"] {
        let sql = format!(
            "DELETE FROM {table} WHERE study_id = $1 \
               AND NOT EXISTS (SELECT 1 FROM studies WHERE id = $1 AND {UNFINISHED})"
        );
        sqlx::query(&sql).bind(id(study)).execute(&mut *conn).await?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "study_state_tests.rs"]
mod tests;
