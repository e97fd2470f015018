//! `gossip_power` across sites: every site an agent holding a block of features, the
//! coordinator a relay (docs/design/federation.md, "Live gossip"). The plan and the
//! coordinator's state machine ([`coordinator`]) and the site's steps ([`site`]); the agent's
//! arithmetic is the numerical core's (`crate::algorithms::gossip_agent`).

pub mod coordinator;
pub(crate) mod site;
