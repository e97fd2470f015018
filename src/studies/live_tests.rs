//! Shorthand for the protocols' tests: each site message as a method of [`Live`], as the hub
//! delivers it ([`Live::deliver`]).

use super::{Live, LiveError, SiteMessage};
use crate::federation::messages::{ShareBox, UnmaskRequest};

impl Live {
    pub(crate) fn shares(&mut self, site: u32, boxes: Vec<ShareBox>) -> Result<(), LiveError> {
        self.deliver(site, SiteMessage::Shares { boxes })
    }

    pub(crate) fn contribute(
        &mut self,
        site: u32,
        round: u32,
        masked: &str,
        signature: &str,
    ) -> Result<(), LiveError> {
        self.deliver(
            site,
            SiteMessage::Contribute {
                round,
                masked,
                signature,
            },
        )
    }

    pub(crate) fn unmask(&mut self, site: u32, round: u32, answer: UnmaskRequest) -> Result<(), LiveError> {
        self.deliver(site, SiteMessage::Unmask { round, answer })
    }

    pub(crate) fn cape_release(&mut self, site: u32, stage: u32, values: &str) -> Result<(), LiveError> {
        self.deliver(site, SiteMessage::CapeRelease { stage, values })
    }

    pub(crate) fn cape_confirm(&mut self, site: u32, stage: u32, signature: &str) -> Result<(), LiveError> {
        self.deliver(site, SiteMessage::StageConfirm { stage, signature })
    }

    pub(crate) fn gossip_confirm(&mut self, site: u32, stage: u32, signature: &str) -> Result<(), LiveError> {
        self.deliver(site, SiteMessage::StageConfirm { stage, signature })
    }

    pub(crate) fn gossip_post(&mut self, site: u32, step: u32, values: &str) -> Result<(), LiveError> {
        self.deliver(site, SiteMessage::GossipPost { step, values })
    }

    pub(crate) fn check_gossip_n(&self, n_samples: Option<i64>) -> Result<(), LiveError> {
        self.check_n_samples(n_samples)
    }
}
