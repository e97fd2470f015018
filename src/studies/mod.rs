//! The coordinator of live studies: one [`live::Live`] per unfinished study in memory, a driver
//! task per study that closes phases at their deadlines, and the store writes each transition
//! needs (docs/design/federation.md). Site handlers call in here; long-polls wait on a
//! per-study change signal.
//!
//! Durable studies (docs/design/federation.md, "Durable studies"): the memory is a cache of the
//! database. Every accepted message and every transition of a `federated_power` study is
//! written as a snapshot ([`durable`]) under the study's lease and fence before anyone learns
//! of it (the reply to the message, or the next task), so a study is continued from the
//! database by this replica after a restart or by any replica whose claim succeeds. A write
//! that fails (the lease was lost, or the database refused) drops the study from memory at
//! once; the next request claims it again from the database.

pub mod durable;
pub mod live;
pub mod study;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use uuid::Uuid;

use crate::federation::messages::{JoinRequest, SiteTask};
use crate::store::{Store, StoreError, StudyLease, StudyRecord, StudySiteRecord, StudySnapshot, StudyWrite};
pub use durable::Journaled;
use live::{Effect, Live, LiveError, Protocol, SiteMessage};

/// How often a driver looks at its study even without news (deadlines are also woken exactly).
const TICK: Duration = Duration::from_millis(250);

struct Entry {
    live: tokio::sync::Mutex<Live>,
    /// Bumped when a site's task may have changed (a phase closed, a message of a protocol
    /// whose tasks follow every message): wakes the sites' long-polls and the driver.
    changed: watch::Sender<u64>,
    /// Wakes only the driver: a round's message that left the phase as it was changes no
    /// other site's task, so waking every long-poll for it (S² wake-ups a round) is wasted.
    driver: tokio::sync::Notify,
    /// The claim every state write of this entry is fenced by.
    lease: StudyLease,
    /// Set when a state write failed: the entry is no longer the study's state; its driver stops.
    dead: std::sync::atomic::AtomicBool,
    /// Journal entries accepted and not yet written (group commit, [`StudyHub::journaled`]).
    journal: Mutex<Pending>,
    /// Held while journal entries are written: one transaction at a time, in order.
    writer: tokio::sync::Mutex<()>,
}

/// The journal entries an entry accepted and has not written yet, numbered in acceptance order.
#[derive(Default)]
struct Pending {
    entries: Vec<String>,
    /// How many entries were accepted, and how many of them are written.
    accepted: u64,
    written: u64,
}

impl Entry {
    fn is_dead(&self) -> bool {
        self.dead.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.journal
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues an accepted message's journal entry (under the study's lock, so in acceptance
    /// order); its number.
    fn accept(&self, text: String) -> u64 {
        let mut pending = self.pending();
        pending.entries.push(text);
        pending.accepted += 1;
        pending.accepted
    }

    /// The entries waiting, and the number of the last of them (to pass to [`Entry::written`]
    /// once they are committed).
    fn take_pending(&self) -> (Vec<String>, u64) {
        let mut pending = self.pending();
        (std::mem::take(&mut pending.entries), pending.accepted)
    }

    fn written(&self, upto: u64) {
        let mut pending = self.pending();
        pending.written = pending.written.max(upto);
    }

    fn is_written(&self, ticket: u64) -> bool {
        self.pending().written >= ticket
    }
}

/// Every live study of this process.
#[derive(Clone)]
pub struct StudyHub {
    store: Store,
    studies: Arc<Mutex<HashMap<Uuid, Arc<Entry>>>>,
    /// Held while a study is claimed from the database, so that concurrent requests for the
    /// same study claim it once.
    resuming: Arc<tokio::sync::Mutex<()>>,
    /// A test hook (`PRIVPCA_TEST_COORDINATOR_ABORT_AT`, hidden): the process aborts right
    /// after it has kept the first snapshot at this protocol point ([`Live::phase_label`]),
    /// as a SIGKILL there would, so a test stops the coordinator at an exact point without
    /// racing the clock.
    abort_at: Option<Arc<str>>,
}

/// Why a site request was refused.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("{0}")]
    Live(#[from] LiveError),
    #[error("the study is not live in this coordinator")]
    NotLive,
    /// A write of the study's state failed (a transient store error, or its lease was taken
    /// over): the entry in memory is dropped, and the next request takes the study up again
    /// from what the database kept. Messages it held but never kept were never acknowledged,
    /// so the request is worth retrying.
    #[error("the study's state is being taken up again from the database")]
    Reloading,
    /// Another replica drives the study under a live lease: this one may serve it once that
    /// lease runs out (or never, if the other keeps it), so the request is worth retrying,
    /// possibly at another replica.
    #[error("the study is driven by another replica")]
    HeldElsewhere,
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl StudyHub {
    pub fn new(store: Store) -> StudyHub {
        StudyHub {
            store,
            studies: Arc::new(Mutex::new(HashMap::new())),
            resuming: Arc::new(tokio::sync::Mutex::new(())),
            abort_at: std::env::var("PRIVPCA_TEST_COORDINATOR_ABORT_AT")
                .ok()
                .filter(|v| !v.trim().is_empty())
                .map(|v| Arc::from(v.trim())),
        }
    }

    fn entry(&self, study: Uuid) -> Option<Arc<Entry>> {
        self.studies
            .lock()
            .ok()
            .and_then(|m| m.get(&study).cloned())
            .filter(|e| !e.is_dead())
    }

    /// The study's entry, claimed from the database when this process does not hold it
    /// (it restarted, or the replica that held it stopped).
    async fn live_entry(&self, study: Uuid) -> Result<Arc<Entry>, HubError> {
        if let Some(entry) = self.entry(study) {
            return Ok(entry);
        }
        self.resume(study).await?;
        self.entry(study).ok_or(HubError::NotLive)
    }

    /// Claims an unfinished durable study and continues it here. Ok(false) when it is not
    /// claimable (finished, no snapshot, or held by another replica whose lease is live).
    pub async fn resume(&self, study: Uuid) -> Result<bool, HubError> {
        let _one_at_a_time = self.resuming.lock().await;
        if self.entry(study).is_some() {
            return Ok(true);
        }
        let Some((record, _)) = self.store.get_study_any(study).await? else {
            return Ok(false);
        };
        if record.status.is_terminal() || self.store.load_study_state(study).await?.is_none() {
            return Ok(false);
        }
        let Some(lease) = self.store.claim_study(study).await? else {
            return Err(HubError::HeldElsewhere);
        };
        // Read again under the claim: the previous holder can no longer change it.
        let Some(text) = self.store.load_study_state(study).await? else {
            return Ok(false);
        };
        let snapshot: durable::Snapshot = serde_json::from_str(&text)
            .map_err(|e| StoreError::Corrupt(format!("the kept state of study {study}: {e}")))?;
        let (join_deadline, round_timeout) = timing(&record);
        let corrupt = |e: String| StoreError::Corrupt(format!("the kept state of study {study}: {e}"));
        let (mut live, effects) =
            Live::restore(study, snapshot, join_deadline, round_timeout).map_err(corrupt)?;
        // The messages accepted since the snapshot, in the order they were acknowledged.
        durable::replay(&mut live, &self.store.load_study_journal(study).await?).map_err(corrupt)?;
        // The last step's store writes again, fenced and idempotent: they were written with
        // the snapshot, in its transaction, unless a version that wrote them after it stopped
        // in between.
        if !effects.is_empty() {
            let writes: Vec<StudyWrite<'_>> = effects.iter().map(write_of).collect();
            self.store.save_study_step(lease, None, &writes).await?;
        }
        let entry = self.insert(study, live, lease);
        tracing::info!(%study, epoch = lease.epoch, "study resumed from its kept state");
        let hub = self.clone();
        tokio::spawn(async move { hub.drive(study, entry).await });
        Ok(true)
    }

    /// Claims and continues every durable study this replica may take now (its own after a
    /// restart, and those whose coordinator's lease ran out). Returns how many it took.
    pub async fn resume_claimable(&self) -> Result<usize, HubError> {
        let mut taken = 0;
        for study in self.store.claimable_studies().await? {
            if self.entry(study).is_some() {
                continue;
            }
            match self.resume(study).await {
                Ok(true) => taken += 1,
                // Another replica claimed it first.
                Ok(false) | Err(HubError::HeldElsewhere) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(taken)
    }

    /// The heartbeat of this replica's studies: renews each study's lease under the epoch
    /// this replica claimed it with. A study whose claim was taken over (its lease ran out and
    /// another replica, or another process under this replica's name, claimed it) is not
    /// renewed back: it is dropped from memory at once and its driver stops. Returns how many
    /// were dropped.
    pub async fn renew_leases(&self) -> usize {
        let entries: Vec<(Uuid, Arc<Entry>)> = match self.studies.lock() {
            Ok(map) => map
                .iter()
                .filter(|(_, e)| !e.is_dead())
                .map(|(id, e)| (*id, e.clone()))
                .collect(),
            Err(_) => return 0,
        };
        let mut lost = 0;
        for (study, entry) in entries {
            match self.store.renew_study_lease(entry.lease).await {
                Ok(true) => {}
                // A finished study's lease is over; it stays in memory a while for late polls.
                Ok(false) if entry.live.lock().await.is_finished() => {}
                Ok(false) => {
                    self.stop(study, &entry);
                    tracing::warn!(%study, "lost the study's lease to another claim; it stops here");
                    lost += 1;
                }
                Err(e) => tracing::warn!(%study, error = %e, "could not renew the study's lease"),
            }
        }
        lost
    }

    /// Until `shutdown`: renews this replica's study leases ([`StudyHub::renew_leases`]) and
    /// claims and continues the durable studies this replica may take (at once, so a restarted
    /// replica continues its studies without waiting for a site, then every `period`, so that
    /// studies of a replica that stopped are taken over).
    pub async fn adopt(self, period: Duration, shutdown: tokio_util::sync::CancellationToken) {
        loop {
            self.renew_leases().await;
            match self.resume_claimable().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(studies = n, "continued durable studies from the database"),
                Err(e) => tracing::warn!(error = %e, "could not look for studies to continue"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
        }
    }

    fn insert(&self, study: Uuid, live: Live, lease: StudyLease) -> Arc<Entry> {
        let (changed, _) = watch::channel(0);
        let entry = Arc::new(Entry {
            live: tokio::sync::Mutex::new(live),
            changed,
            driver: tokio::sync::Notify::new(),
            lease,
            dead: std::sync::atomic::AtomicBool::new(false),
            journal: Mutex::new(Pending::default()),
            writer: tokio::sync::Mutex::new(()),
        });
        if let Ok(mut map) = self.studies.lock() {
            map.insert(study, entry.clone());
        }
        entry
    }

    /// The entry is no longer the study's state (a fenced write or a renewal failed): its
    /// driver and long-polls stop, and the next request claims the study from the database.
    fn stop(&self, study: Uuid, entry: &Entry) {
        entry.dead.store(true, std::sync::atomic::Ordering::SeqCst);
        entry.changed.send_modify(|v| *v += 1);
        if let Ok(mut map) = self.studies.lock()
            && map.get(&study).is_some_and(|e| std::ptr::eq(&**e, entry))
        {
            map.remove(&study);
        }
    }

    /// Keeps a step: the study's snapshot and the step's store writes in one fenced
    /// transaction ([`Store::save_study_step`]), so a replica that lost its lease changes
    /// nothing. A failed write drops the entry: nothing of the step is shown to anyone. Every
    /// protocol's study is kept this way (there is no unfenced write of a step).
    async fn persist(&self, entry: &Entry, live: &Live, effects: Vec<Effect>) -> Result<(), HubError> {
        self.persist_with(entry, live, effects, &[]).await
    }

    /// [`StudyHub::persist`] with `extra` store writes of the step.
    async fn persist_with(
        &self,
        entry: &Entry,
        live: &Live,
        effects: Vec<Effect>,
        extra: &[StudyWrite<'_>],
    ) -> Result<(), HubError> {
        let study = live.study;
        let snapshot = live.snapshot(&effects);
        let text = serde_json::to_string(&snapshot).map_err(StoreError::from)?;
        let mut writes: Vec<StudyWrite<'_>> = extra.to_vec();
        writes.extend(effects.iter().map(write_of));
        // The journal entries accepted and not yet written go first, in this transaction
        // (behind any group being written): the snapshot never gets ahead of them.
        let _writing = entry.writer.lock().await;
        if entry.is_dead() {
            // A journal write before this one failed: the live state holds messages that were
            // never kept, so it must not be kept either.
            return Err(HubError::Reloading);
        }
        let (pending, accepted) = entry.take_pending();
        let kept = StudySnapshot {
            state: &text,
            journal: &pending,
            supersedes_journal: live.snapshot_supersedes_journal(),
        };
        let saved = self.store.save_study_step(entry.lease, Some(kept), &writes).await;
        if saved.is_ok() {
            entry.written(accepted);
        }
        if let Err(e) = saved {
            self.stop(study, entry);
            tracing::warn!(%study, error = %e, "the study's state could not be kept; it stops here");
            return Err(e.into());
        }
        self.abort_hook(live);
        effects.iter().for_each(|effect| log_effect(study, effect));
        Ok(())
    }

    /// Keeps a step that changed only the phase as one journal row (`Live::journal_step`),
    /// written with every row accepted before it in one fenced transaction, while the study's
    /// lock is held: no site is shown the new phase before the row and everything it rests
    /// on are kept. A failed write drops the entry, as a failed snapshot does.
    async fn keep_in_journal(&self, entry: &Entry, live: &Live, step: Journaled) -> Result<(), HubError> {
        let text = serde_json::to_string(&step).map_err(StoreError::from)?;
        let _writing = entry.writer.lock().await;
        if entry.is_dead() {
            return Err(HubError::Reloading);
        }
        let (mut pending, accepted) = entry.take_pending();
        pending.push(text);
        if let Err(e) = self.store.append_study_journal(entry.lease, &pending).await {
            self.stop(live.study, entry);
            tracing::warn!(study = %live.study, error = %e, "the study's state could not be kept; it stops here");
            return Err(e.into());
        }
        entry.written(accepted);
        self.abort_hook(live);
        Ok(())
    }

    /// The coordinator's test hook (`PRIVPCA_TEST_COORDINATOR_ABORT_AT`): stop the process, as
    /// a SIGKILL would, right after the study was kept at the named protocol point.
    fn abort_hook(&self, live: &Live) {
        self.abort_label_hook(live.phase_label().as_deref());
    }

    /// The test hook (`PRIVPCA_TEST_COORDINATOR_ABORT_AT`): aborts once the study is kept at the
    /// named protocol point.
    fn abort_label_hook(&self, label: Option<&str>) {
        if let Some(at) = &self.abort_at
            && label == Some(&**at)
        {
            eprintln!("test hook: aborting after keeping the study at {at}");
            std::process::abort();
        }
    }

    /// Starts coordinating a newly created study (this replica created it: epoch 0).
    pub fn open(&self, study: &StudyRecord, sites: &[StudySiteRecord], protocol: Protocol) {
        let names: BTreeMap<u32, String> = sites.iter().map(|s| (s.index, s.name.clone())).collect();
        let (join_deadline, round_timeout) = timing(study);
        let live = Live::new(
            study.id,
            protocol,
            u32::try_from(study.threshold).unwrap_or(2),
            usize::try_from(study.n_features).unwrap_or(0),
            names,
            join_deadline,
            round_timeout,
        );
        let entry = self.insert(study.id, live, StudyLease::created(study.id));
        let hub = self.clone();
        let id = study.id;
        tokio::spawn(async move {
            // The first snapshot, so that the study can be resumed even before anyone joins.
            let first = {
                let live = entry.live.lock().await;
                hub.persist(&entry, &live, Vec::new()).await
            };
            if first.is_ok() {
                hub.drive(id, entry).await;
            }
        });
    }

    /// Closes the study's current phase now, as its deadline would; false when the study is
    /// not live here. A test hook: a test of what a timeout does calls it at a known protocol
    /// point instead of racing a short real timeout.
    #[doc(hidden)]
    pub async fn expire_phase(&self, study: Uuid) -> bool {
        let Some(entry) = self.entry(study) else {
            return false;
        };
        let mut live = entry.live.lock().await;
        let now = live.deadline().max(Instant::now());
        let before = live.marker();
        let effects = live.advance(now);
        if !effects.is_empty() || live.marker() != before {
            let _ = self.persist(&entry, &live, effects).await;
            entry.changed.send_modify(|v| *v += 1);
        }
        true
    }

    /// The driver: advance at every change and deadline until the study is over.
    async fn drive(self, study: Uuid, entry: Arc<Entry>) {
        let mut changes = entry.changed.subscribe();
        loop {
            if entry.is_dead() {
                return;
            }
            let (finished, deadline) = {
                let mut live = entry.live.lock().await;
                let before = live.marker();
                let effects = live.advance(Instant::now());
                if !effects.is_empty() || live.marker() != before {
                    let kept = match live.journal_step(before) {
                        Some(step) if effects.is_empty() => self.keep_in_journal(&entry, &live, step).await,
                        _ => self.persist(&entry, &live, effects).await,
                    };
                    entry.changed.send_modify(|v| *v += 1);
                    if kept.is_err() {
                        return;
                    }
                }
                (live.is_finished(), live.deadline())
            };
            if finished {
                break;
            }
            let wake = tokio::time::Instant::from_std(deadline.min(Instant::now() + TICK));
            tokio::select! {
                _ = changes.changed() => {}
                _ = entry.driver.notified() => {}
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
        // Keep the finished state a while so sites polling late learn the outcome.
        tokio::time::sleep(Duration::from_secs(600)).await;
        if let Ok(mut map) = self.studies.lock()
            && map.get(&study).is_some_and(|e| Arc::ptr_eq(e, &entry))
        {
            map.remove(&study);
        }
    }

    /// The owner cancelled the study (the store already says so).
    pub async fn cancel(&self, study: Uuid) {
        if let Some(entry) = self.entry(study) {
            entry.live.lock().await.cancel();
            entry.changed.send_modify(|v| *v += 1);
        }
        let _ = self.store.drop_study_state(study).await;
    }

    async fn with_live<T>(
        &self,
        study: Uuid,
        f: impl FnOnce(&mut Live) -> Result<T, LiveError>,
    ) -> Result<T, HubError> {
        let entry = self.live_entry(study).await?;
        let out = {
            let mut live = entry.live.lock().await;
            let out = f(&mut live)?;
            // Accepted only once kept: a message is acknowledged after its snapshot is written.
            self.persist(&entry, &live, Vec::new()).await?;
            out
        };
        entry.changed.send_modify(|v| *v += 1);
        Ok(out)
    }

    /// A site joins: recorded in the store (once) and in the live state. The store's record is
    /// written with the snapshot, in its fenced transaction, so the two never
    /// disagree (a stop between them would leave the site joined in one and not the other, and
    /// its retried join refused as a repeat).
    pub async fn join(
        &self,
        study: Uuid,
        site: u32,
        n_samples: Option<i64>,
        request: JoinRequest,
    ) -> Result<(), HubError> {
        let entry = self.live_entry(study).await?;
        {
            let mut live = entry.live.lock().await;
            // Check the keys before the store records anything.
            let mut probe = request.clone();
            probe.n_samples = None;
            live.check_join(site, &probe)?;
            live.check_n_samples(n_samples)?;
            live.join(site, request)?;
            let join = [StudyWrite::Join { site, n_samples }];
            self.persist_with(&entry, &live, Vec::new(), &join).await?;
        }
        entry.changed.send_modify(|v| *v += 1);
        Ok(())
    }

    /// A site's message to its study: a `federated_power` message is kept in the study's
    /// journal before it is acknowledged (`StudyHub::journaled`), the others with the
    /// study's snapshot (`StudyHub::with_live`). The one way a site message reaches a study.
    pub async fn deliver(&self, study: Uuid, delivery: Delivery) -> Result<(), HubError> {
        match delivery {
            Delivery::Journaled(entry) => self.journaled(study, entry).await,
            Delivery::CapeRelease { site, stage, values } => {
                self.with_live(study, |live| {
                    live.deliver(
                        site,
                        SiteMessage::CapeRelease {
                            stage,
                            values: &values,
                        },
                    )
                })
                .await
            }
            Delivery::StageConfirm {
                site,
                stage,
                signature,
            } => {
                self.with_live(study, |live| {
                    live.deliver(
                        site,
                        SiteMessage::StageConfirm {
                            stage,
                            signature: &signature,
                        },
                    )
                })
                .await
            }
            Delivery::GossipPost { site, step, values } => {
                self.with_live(study, |live| {
                    live.deliver(
                        site,
                        SiteMessage::GossipPost {
                            step,
                            values: &values,
                        },
                    )
                })
                .await
            }
        }
    }

    /// Accepts a round's message and keeps it before acknowledging it, as [`StudyHub::with_live`]
    /// does, but as one journal row of the message's own size ([`Store::append_study_journal`])
    /// instead of the whole snapshot: accepting it never changes the phase, so the snapshot
    /// plus the journal is the state (docs/performance-federation.md). Group commit: the row is
    /// written after the study's lock is released, and messages accepted while another
    /// group is being written wait and are written together in the next transaction; each is
    /// acknowledged (this returns) only once its row is committed. A snapshot written meanwhile
    /// takes the waiting rows into its own transaction ([`StudyHub::persist_with`]). A failed
    /// write drops the entry, as a failed snapshot does, and refuses every message of it.
    async fn journaled(&self, study: Uuid, message: Journaled) -> Result<(), HubError> {
        let entry = self.live_entry(study).await?;
        let (ticket, wake, label) = {
            let mut live = entry.live.lock().await;
            let before = live.marker();
            let tasks_before = live.tasks_ready();
            message.apply(&mut live)?;
            // A message that hands out new tasks without a phase change (the last SecAgg+
            // reveal fixes the graph: every site's `share_keys`) wakes the sites once it is kept.
            let wake = live.tasks_ready() != tasks_before;
            if live.marker() == before {
                let text = serde_json::to_string(&message).map_err(StoreError::from)?;
                let key_exchange = matches!(message, Journaled::Shares { .. } | Journaled::Reveal { .. });
                (
                    Some(entry.accept(text)),
                    wake,
                    key_exchange.then(|| live.phase_label()).flatten(),
                )
            } else {
                self.persist(&entry, &live, Vec::new()).await?;
                (None, false, None)
            }
        };
        // Wake the driver before the journal write: a phase change this message completes is
        // kept by a snapshot that takes the waiting journal rows into its own transaction
        // (`persist_with`), so nothing is shown before this row is kept, and the round does not
        // wait for one more transaction first. The waiting sites are woken only when the phase
        // changed here; otherwise the driver wakes them if it closes the phase.
        if ticket.is_some() {
            entry.driver.notify_one();
        } else {
            entry.changed.send_modify(|v| *v += 1);
        }
        if let Some(ticket) = ticket {
            self.write_journal(study, &entry, ticket).await?;
            if wake {
                entry.changed.send_modify(|v| *v += 1);
            }
            // The crash test's hook also names points kept by a journal row (`shares`).
            self.abort_label_hook(label.as_deref());
        }
        Ok(())
    }

    /// Returns once the journal entry numbered `ticket` is committed: writes every entry
    /// waiting, in one transaction, unless a write before this one already took it.
    async fn write_journal(&self, study: Uuid, entry: &Entry, ticket: u64) -> Result<(), HubError> {
        let _writing = entry.writer.lock().await;
        if entry.is_written(ticket) {
            return Ok(());
        }
        if entry.is_dead() {
            // The write that held this entry failed: it was never kept.
            return Err(HubError::Reloading);
        }
        let (pending, accepted) = entry.take_pending();
        match self.store.append_study_journal(entry.lease, &pending).await {
            Ok(()) => {
                entry.written(accepted);
                Ok(())
            }
            Err(e) => {
                self.stop(study, entry);
                tracing::warn!(%study, error = %e, "the study's messages could not be kept; it stops here");
                Err(e.into())
            }
        }
    }

    /// The site's next task, waiting up to `wait` for one that is not `wait`.
    pub async fn task(&self, study: Uuid, site: u32, wait: Duration) -> Result<SiteTask, HubError> {
        let entry = self.live_entry(study).await?;
        let mut changes = entry.changed.subscribe();
        let until = tokio::time::Instant::now() + wait;
        loop {
            if entry.is_dead() {
                return Err(HubError::Reloading);
            }
            let task = entry.live.lock().await.task(site);
            if !matches!(task, SiteTask::Wait { .. }) {
                return Ok(task);
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return Ok(task) },
                _ = tokio::time::sleep_until(until) => return Ok(task),
            }
        }
    }
}

/// A study's join deadline and round timeout as this process's clock sees them.
fn timing(study: &StudyRecord) -> (Instant, Duration) {
    let until_deadline = (study.join_deadline - chrono::Utc::now())
        .to_std()
        .unwrap_or(Duration::ZERO);
    let round_timeout = Duration::from_millis(u64::try_from(study.round_timeout_ms).unwrap_or(1));
    (Instant::now() + until_deadline, round_timeout)
}

/// An effect as the store write of a kept step.
fn write_of(effect: &Effect) -> StudyWrite<'_> {
    match effect {
        Effect::Start { roster } => StudyWrite::Start { roster },
        Effect::Charge { roster, dropped } => StudyWrite::Charge { roster, dropped },
        Effect::Dropped { sites, round } => StudyWrite::Dropped { sites, round: *round },
        Effect::Progress { done } => StudyWrite::Progress { done: *done },
        Effect::Succeeded { output, report } => StudyWrite::Succeeded {
            d: output.basis.nrows(),
            k: output.basis.ncols(),
            basis: output.basis.as_slice(),
            eigenvalues: output.eigenvalues.as_deref(),
            report,
        },
        Effect::Failed { reason, report } => StudyWrite::Failed {
            reason,
            report: report.as_ref(),
        },
    }
}

/// The log line of a study's lifecycle step.
fn log_effect(study: Uuid, effect: &Effect) {
    match effect {
        Effect::Start { roster } => tracing::info!(%study, sites = roster.len(), "study started"),
        Effect::Succeeded { .. } => tracing::info!(%study, "study succeeded"),
        Effect::Failed { reason, .. } => tracing::warn!(%study, %reason, "study failed"),
        _ => {}
    }
}

/// A site's message to its study, as the HTTP layer hands it to [`StudyHub::deliver`].
#[derive(Debug)]
pub enum Delivery {
    /// A `federated_power` message (key exchange or round), kept in the study's journal.
    Journaled(Journaled),
    /// A CAPE site's release for `stage`.
    CapeRelease { site: u32, stage: u32, values: String },
    /// A CAPE site's confirmation of `stage`'s transcript, or a gossip agent's (stage 0).
    StageConfirm {
        site: u32,
        stage: u32,
        signature: String,
    },
    /// A gossip agent's value of exchange `step`.
    GossipPost { site: u32, step: u32, values: String },
}

#[cfg(test)]
#[path = "hub_tests.rs"]
mod tests;
