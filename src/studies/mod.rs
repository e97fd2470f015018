//! The coordinator of live studies: one [`live::Live`] per unfinished study in memory, a driver
//! task per study that closes phases at their deadlines, and the store writes each transition
//! needs (docs/design/federation.md). Site handlers call in here; long-polls wait on a
//! per-study change signal.

pub mod algorithm;
pub mod cape_live;
pub mod live;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use uuid::Uuid;

use crate::federation::messages::{JoinRequest, ShareBox, SiteTask, UnmaskRequest};
use crate::store::{SiteStatus, Store, StudyRecord, StudySiteRecord, StudyStatus};
use live::{Effect, Live, LiveError, Protocol};

/// How often a driver looks at its study even without news (deadlines are also woken exactly).
const TICK: Duration = Duration::from_millis(250);

struct Entry {
    live: tokio::sync::Mutex<Live>,
    changed: watch::Sender<u64>,
}

/// Every live study of this process.
#[derive(Clone)]
pub struct StudyHub {
    store: Store,
    studies: Arc<Mutex<HashMap<Uuid, Arc<Entry>>>>,
}

/// Why a site request was refused.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("{0}")]
    Live(#[from] LiveError),
    #[error("the study is not live in this coordinator")]
    NotLive,
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl StudyHub {
    pub fn new(store: Store) -> StudyHub {
        StudyHub {
            store,
            studies: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn entry(&self, study: Uuid) -> Option<Arc<Entry>> {
        self.studies.lock().ok().and_then(|m| m.get(&study).cloned())
    }

    /// Starts coordinating a newly created study.
    pub fn open(&self, study: &StudyRecord, sites: &[StudySiteRecord], protocol: Protocol) {
        let names: BTreeMap<u32, String> = sites.iter().map(|s| (s.index, s.name.clone())).collect();
        let until_deadline = (study.join_deadline - chrono::Utc::now())
            .to_std()
            .unwrap_or(Duration::ZERO);
        let round_timeout = Duration::from_millis(u64::try_from(study.round_timeout_ms).unwrap_or(1));
        let live = Live::new(
            study.id,
            protocol,
            u32::try_from(study.threshold).unwrap_or(2),
            usize::try_from(study.n_features).unwrap_or(0),
            names,
            Instant::now() + until_deadline,
            round_timeout,
        );
        let (changed, _) = watch::channel(0);
        let entry = Arc::new(Entry {
            live: tokio::sync::Mutex::new(live),
            changed,
        });
        if let Ok(mut map) = self.studies.lock() {
            map.insert(study.id, entry.clone());
        }
        let hub = self.clone();
        let id = study.id;
        tokio::spawn(async move { hub.drive(id, entry).await });
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
        let effects = live.advance(now);
        if !effects.is_empty() {
            self.apply(study, effects).await;
            entry.changed.send_modify(|v| *v += 1);
        }
        true
    }

    /// The driver: advance at every change and deadline until the study is over.
    async fn drive(self, study: Uuid, entry: Arc<Entry>) {
        let mut changes = entry.changed.subscribe();
        loop {
            let (finished, deadline) = {
                let mut live = entry.live.lock().await;
                let effects = live.advance(Instant::now());
                if !effects.is_empty() {
                    self.apply(study, effects).await;
                    entry.changed.send_modify(|v| *v += 1);
                }
                (live.is_finished(), live.deadline())
            };
            if finished {
                break;
            }
            let wake = tokio::time::Instant::from_std(deadline.min(Instant::now() + TICK));
            tokio::select! {
                _ = changes.changed() => {}
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
        // Keep the finished state a while so sites polling late learn the outcome.
        tokio::time::sleep(Duration::from_secs(600)).await;
        if let Ok(mut map) = self.studies.lock() {
            map.remove(&study);
        }
    }

    /// Writes a transition's effects. A store failure here fails the study (it cannot go on
    /// with an unrecorded charge); it is logged, never shown to sites.
    async fn apply(&self, study: Uuid, effects: Vec<Effect>) {
        for effect in effects {
            let result = self.apply_one(study, effect).await;
            if let Err(e) = result {
                tracing::error!(%study, error = %e, "recording a study transition failed");
                let _ = self
                    .store
                    .end_study(
                        study,
                        StudyStatus::Failed,
                        "internal error while recording the study",
                        None,
                    )
                    .await;
            }
        }
    }

    async fn apply_one(&self, study: Uuid, effect: Effect) -> Result<(), crate::store::StoreError> {
        match effect {
            Effect::Start { roster } => {
                self.store.start_study(study, &roster).await?;
                tracing::info!(%study, sites = roster.len(), "study started");
            }
            Effect::Charge { roster, dropped } => {
                for site in dropped {
                    self.store
                        .set_study_site_status(study, site, SiteStatus::Dropped, Some(0))
                        .await?;
                }
                self.store.charge_study_sites(study, &roster).await?;
            }
            Effect::Dropped { sites, round } => {
                for site in sites {
                    self.store
                        .set_study_site_status(study, site, SiteStatus::Dropped, Some(round))
                        .await?;
                }
            }
            Effect::Progress { done } => self.store.set_study_progress(study, done).await?,
            Effect::Succeeded { output, report } => {
                let (d, k) = output.basis.shape();
                self.store
                    .finish_study(
                        study,
                        d,
                        k,
                        output.basis.as_slice(),
                        output.eigenvalues.as_deref(),
                        &report,
                    )
                    .await?;
                tracing::info!(%study, "study succeeded");
            }
            Effect::Failed { reason, report } => {
                self.store
                    .end_study(study, StudyStatus::Failed, &reason, report.as_ref())
                    .await?;
                tracing::warn!(%study, %reason, "study failed");
            }
        }
        Ok(())
    }

    /// The owner cancelled the study (the store already says so).
    pub async fn cancel(&self, study: Uuid) {
        if let Some(entry) = self.entry(study) {
            entry.live.lock().await.cancel();
            entry.changed.send_modify(|v| *v += 1);
        }
    }

    async fn with_live<T>(
        &self,
        study: Uuid,
        f: impl FnOnce(&mut Live) -> Result<T, LiveError>,
    ) -> Result<T, HubError> {
        let entry = self.entry(study).ok_or(HubError::NotLive)?;
        let out = {
            let mut live = entry.live.lock().await;
            f(&mut live)?
        };
        entry.changed.send_modify(|v| *v += 1);
        Ok(out)
    }

    /// A site joins: recorded in the store (once) and in the live state.
    pub async fn join(
        &self,
        study: Uuid,
        site: u32,
        n_samples: Option<i64>,
        request: JoinRequest,
    ) -> Result<(), HubError> {
        let entry = self.entry(study).ok_or(HubError::NotLive)?;
        {
            let mut live = entry.live.lock().await;
            // Check the keys before the store records anything.
            let mut probe = request.clone();
            probe.n_samples = None;
            live.check_join(site, &probe)?;
            if !self.store.join_study_site(study, site, n_samples).await? {
                return Err(LiveError::Conflict(
                    "this site has already joined, or the study is no longer enrolling".into(),
                )
                .into());
            }
            live.join(site, request)?;
        }
        entry.changed.send_modify(|v| *v += 1);
        Ok(())
    }

    pub async fn shares(&self, study: Uuid, site: u32, boxes: Vec<ShareBox>) -> Result<(), HubError> {
        self.with_live(study, |live| live.shares(site, boxes)).await
    }

    pub async fn contribute(
        &self,
        study: Uuid,
        site: u32,
        round: u32,
        masked: String,
    ) -> Result<(), HubError> {
        self.with_live(study, |live| live.contribute(site, round, &masked))
            .await
    }

    pub async fn unmask(
        &self,
        study: Uuid,
        site: u32,
        round: u32,
        answer: UnmaskRequest,
    ) -> Result<(), HubError> {
        self.with_live(study, |live| live.unmask(site, round, answer))
            .await
    }

    pub async fn cape_release(
        &self,
        study: Uuid,
        site: u32,
        stage: u32,
        values: String,
    ) -> Result<(), HubError> {
        self.with_live(study, |live| live.cape_release(site, stage, &values))
            .await
    }

    /// The site's next task, waiting up to `wait` for one that is not `wait`.
    pub async fn task(&self, study: Uuid, site: u32, wait: Duration) -> Result<SiteTask, HubError> {
        let entry = self.entry(study).ok_or(HubError::NotLive)?;
        let mut changes = entry.changed.subscribe();
        let until = tokio::time::Instant::now() + wait;
        loop {
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
