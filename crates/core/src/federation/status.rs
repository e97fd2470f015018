//! Where a study and each of its sites stand: the lifecycle the coordinator records and every
//! site reads in its study view. The service's store persists them by `as_str`.

use serde::{Deserialize, Serialize};

/// Lifecycle of a study. `Succeeded`, `Failed` and `Cancelled` are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StudyStatus {
    Enrolling,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl StudyStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            StudyStatus::Enrolling => "enrolling",
            StudyStatus::Running => "running",
            StudyStatus::Succeeded => "succeeded",
            StudyStatus::Failed => "failed",
            StudyStatus::Cancelled => "cancelled",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [
            StudyStatus::Enrolling,
            StudyStatus::Running,
            StudyStatus::Succeeded,
            StudyStatus::Failed,
            StudyStatus::Cancelled,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            StudyStatus::Succeeded | StudyStatus::Failed | StudyStatus::Cancelled
        )
    }
}

/// Where one site stands in its study.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SiteStatus {
    Invited,
    Joined,
    Contributing,
    Dropped,
    Done,
}

impl SiteStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SiteStatus::Invited => "invited",
            SiteStatus::Joined => "joined",
            SiteStatus::Contributing => "contributing",
            SiteStatus::Dropped => "dropped",
            SiteStatus::Done => "done",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [
            SiteStatus::Invited,
            SiteStatus::Joined,
            SiteStatus::Contributing,
            SiteStatus::Dropped,
            SiteStatus::Done,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}
