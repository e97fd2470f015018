//! The wire messages between the coordinator and a site (`/v1/site/*`), shared by the HTTP
//! handlers and the `privpca site` client. Binary payloads travel as standard base64 (with
//! padding): public keys (32 bytes), AEAD boxes, Shamir shares, f64 matrices (little-endian,
//! column-major) and masked u64 vectors (little-endian).
//!
//! See `docs/design/federation.md` for the protocol.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::status::{SiteStatus, StudyStatus};
use crate::dataset::Relation;

/// What a site learns about its study before joining (`GET /v1/site/study`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SiteStudyView {
    pub study_id: Uuid,
    pub study_name: String,
    pub algorithm: String,
    /// This site's name and index (1-based; also its Shamir x-coordinate).
    pub site_name: String,
    pub site_index: u32,
    /// Number of sites invited.
    pub n_sites: u32,
    pub threshold: u32,
    pub n_features: usize,
    /// `replace_one` or `add_remove`.
    #[schema(value_type = String)]
    pub relation: Relation,
    pub row_norm_bound: f64,
    /// The L1 bound α (√d·β when the study did not set one).
    pub row_l1_bound: f64,
    /// The resolved algorithm configuration (k, p, iterations, sensitivity, multiplier, ...).
    pub config: serde_json::Value,
    /// What taking part costs this site: ρ (zCDP) and δ.
    pub cost_rho: f64,
    pub cost_delta: f64,
    /// Fixed-point encoding: values are scaled by 2^fraction_bits.
    pub fraction_bits: u32,
    /// Largest number of records a site may hold (the no-wrap bound assumes it).
    pub max_site_samples: u64,
    /// Study status (`enrolling`, `running`, ...).
    #[schema(value_type = String)]
    pub status: StudyStatus,
    /// This site's status (`invited`, `joined`, ...).
    #[schema(value_type = String)]
    pub site_status: SiteStatus,
}

/// `POST /v1/site/join`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinRequest {
    /// The site's record count. Required when the relation is `replace_one` (n is public);
    /// must be absent under `add_remove` (n is private there).
    #[serde(default)]
    pub n_samples: Option<u64>,
    /// `federated_power`: the X25519 public key for the share boxes (base64, 32 bytes).
    /// Must be absent for `cape_pca` (CAPE relays no boxes).
    #[serde(default)]
    pub encryption_public_key: Option<String>,
    /// `federated_power`: one X25519 masking public key per round, rounds 1..=L in order.
    /// `cape_pca` / `cape_agn`: one X25519 pair-noise public key per protocol stage (one / two).
    /// Base64, 32 bytes each.
    pub mask_public_keys: Vec<String>,
    /// `federated_power`: the Ed25519 verifying key of the site's round signatures (base64, 32
    /// bytes; docs/design/federation.md, "The consistency round"). Must be absent otherwise.
    #[serde(default)]
    pub signing_public_key: Option<String>,
    /// `federated_power` with `secure_aggregation: "sparse"`: SHA-256 commitment (base64, 32
    /// bytes) to the site's secret share of the graph seed, revealed at `POST /v1/site/seed`
    /// once the roster is fixed (docs/design/federation.md, "Live SecAgg+"). Must be absent
    /// otherwise.
    #[serde(default)]
    pub seed_commitment: Option<String>,
}

/// Another site of a CAPE study, with its pair-noise public keys (one per stage).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CapePeer {
    pub index: u32,
    pub name: String,
    pub noise_public_keys: Vec<String>,
    /// The Ed25519 verifying key of its stage confirmations (base64). Empty only in a study kept
    /// before confirmations existed.
    #[serde(default)]
    pub signing_public_key: String,
}

/// `POST /v1/site/stages/{stage}/release`: a CAPE site's noisy statistic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CapeReleaseRequest {
    /// â_s = a_s + E_s + F_s + G_s: f64 little-endian, base64 (the packed upper triangle of
    /// X_sᵀX_s for `cape_pca`, d(d+1)/2 values).
    pub values: String,
}

/// A neighbour's value of one `gossip_power` exchange, relayed by the coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GossipValue {
    /// The neighbour's site index.
    pub index: u32,
    /// `rows`×`cols` f64, column-major, little-endian, base64.
    pub values: String,
    pub rows: usize,
    pub cols: usize,
}

/// An agent of a `gossip_power` study, as the consistency round shows it to the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GossipAgent {
    pub index: u32,
    pub name: String,
    /// The Ed25519 verifying key of its confirmation (base64).
    pub signing_public_key: String,
}

/// `POST /v1/site/gossip/{step}`: this agent's value of exchange `step` (a release or a
/// post-processing of releases; docs/design/federation.md, "Live gossip").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GossipPostRequest {
    /// f64 little-endian, column-major, base64: Gram p×p, message n×p, max 1×1, segment d_i×p.
    pub values: String,
}

/// One participant of the fixed roster, with its public keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Participant {
    pub index: u32,
    pub name: String,
    pub encryption_public_key: String,
    pub mask_public_keys: Vec<String>,
    /// The Ed25519 verifying key of its round signatures (base64). Empty only in a snapshot
    /// kept before signatures existed; a site refuses such a roster.
    #[serde(default)]
    pub signing_public_key: String,
    /// SecAgg+ studies: its commitment to its share of the graph seed (base64); empty on the
    /// complete graph.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub seed_commitment: String,
}

/// `POST /v1/site/seed`: this site's share of a SecAgg+ study's graph seed, the 32 bytes its
/// join's `seed_commitment` committed to (sent only once the roster is fixed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SeedRevealRequest {
    /// base64, 32 bytes.
    pub reveal: String,
}

/// A site's revealed share of the graph seed, as relayed to every participant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SeedReveal {
    pub site: u32,
    /// base64, 32 bytes.
    pub reveal: String,
}

/// One AEAD box of Shamir shares from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShareBox {
    pub from: u32,
    pub to: u32,
    /// base64 of nonce ‖ ciphertext.
    pub ciphertext: String,
}

/// `POST /v1/site/shares`: one box for every participant of the roster (itself included), or
/// under SecAgg+ one for each of its graph neighbours.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SharesRequest {
    pub boxes: Vec<ShareBox>,
}

/// `POST /v1/site/rounds/{round}/contribution`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContributionRequest {
    /// The masked fixed-point vector z (d·p u64 words, little-endian, base64).
    pub masked: String,
    /// The site's Ed25519 signature (base64, 64 bytes) of the round's contribution statement:
    /// study, round, the hash of the iterate it received and the roster it masked with
    /// (`federation::transcript::contribution_message`).
    pub signature: String,
}

/// A site's signature of a round, as relayed to the other survivors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SiteSignature {
    pub site: u32,
    /// Ed25519 signature, base64 (64 bytes).
    pub signature: String,
}

impl SiteSignature {
    /// The signatures of `sites` (all of them when `None`) kept by site, as relayed.
    pub fn relay(
        signatures: &std::collections::BTreeMap<u32, String>,
        sites: Option<&[u32]>,
    ) -> Vec<SiteSignature> {
        signatures
            .iter()
            .filter(|(site, _)| sites.is_none_or(|only| only.contains(site)))
            .map(|(&site, signature)| SiteSignature {
                site,
                signature: signature.clone(),
            })
            .collect()
    }
}

/// `POST /v1/site/rounds/{round}/confirm`: a survivor's signature of the round's transcript
/// (study, round, iterate hash, roster, survivors, dropped;
/// `federation::transcript::confirmation_message`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfirmRequest {
    /// Ed25519 signature, base64 (64 bytes).
    pub signature: String,
}

/// One revealed Shamir share of another site's round secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RevealedShare {
    /// Whose secret this is a share of.
    pub site: u32,
    /// The share bytes (base64).
    pub share: String,
}

/// `POST /v1/site/rounds/{round}/unmask`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UnmaskRequest {
    /// Shares of the self-mask seeds b_{u,r} of every survivor u.
    pub self_mask_shares: Vec<RevealedShare>,
    /// Shares of the masking secrets s_{d,r} of every dropped site d.
    pub mask_key_shares: Vec<RevealedShare>,
}

/// What the site should do next (`GET /v1/site/task`, long-polled).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "task", rename_all = "snake_case")]
pub enum SiteTask {
    /// Nothing yet (enrolment or other sites still pending): ask again.
    Wait {
        /// The study status, for display.
        #[schema(value_type = String)]
        status: StudyStatus,
    },
    /// SecAgg+ studies: the roster is fixed, with every site's seed commitment; fix it (its
    /// hash is printed and checked against `--expect-roster-hash`) and reveal this site's
    /// share of the graph seed at `POST /v1/site/seed`.
    RevealSeed { participants: Vec<Participant> },
    /// The roster is fixed: send one share box to every participant. SecAgg+: one to each
    /// graph neighbour, the graph derived from `seed_reveals` (every participant's reveal), and
    /// `participants` is empty: the roster is the one of the `reveal_seed` task.
    ShareKeys {
        participants: Vec<Participant>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        seed_reveals: Vec<SeedReveal>,
    },
    /// Round `round` is open: compute, mask and send the contribution.
    Contribute {
        round: u32,
        rounds: u32,
        /// Indices of the sites expected this round (the mask partners), ascending.
        roster: Vec<u32>,
        /// The public iterate X_{round−1}: `rows`×`cols` f64, column-major, little-endian, base64.
        iterate: String,
        rows: usize,
        cols: usize,
        /// The share boxes addressed to this site (sent with round 1 only; empty afterwards).
        inbox: Vec<ShareBox>,
        /// A power round of a study with a private clip: the clip norm c the search released,
        /// at which the site clips its rows (its round signature covers it). In the clip's own
        /// steps the iterate is the 1×2 [c, q] instead.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        clip_norm: Option<f64>,
        /// Every round after the centre's in a study with a centre (`center: "private"` or a
        /// given one): μ̂, d f64 little-endian, base64. The site maps each row to clip(x − μ̂)
        /// before the round's computation; its round signature covers μ̂.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        center: Option<String>,
    },
    /// The consistency round of round `round`: check every survivor's contribution
    /// signature against this site's own view, then sign the transcript (the round's iterate
    /// hash and roster, `survivors` and `dropped`) once.
    Confirm {
        round: u32,
        survivors: Vec<u32>,
        dropped: Vec<u32>,
        /// Every survivor's contribution signature.
        contributions: Vec<SiteSignature>,
    },
    /// Round `round` needs unmasking information.
    Unmask {
        round: u32,
        survivors: Vec<u32>,
        dropped: Vec<u32>,
        /// Every survivor's contribution signature.
        #[serde(default)]
        contributions: Vec<SiteSignature>,
        /// The survivors' confirmations of the transcript (at least the site's quorum must
        /// verify, or it reveals nothing).
        #[serde(default)]
        confirmations: Vec<SiteSignature>,
    },
    /// CAPE (`cape_pca`): send this stage's noisy statistic.
    CapeRelease {
        stage: u32,
        stages: u32,
        /// Every other site of the roster (the pair-noise partners), ascending by index.
        peers: Vec<CapePeer>,
        /// The seed of F_s, this site's aggregator noise (base64, 32 bytes; sent to this site only).
        aggregator_seed: String,
        /// The coordinator's calibration for this roster. The site derives its own from the
        /// study's public terms, refuses when they differ, and draws only with its own.
        #[schema(value_type = Value)]
        noise: crate::algorithms::cape_noise::CapeNoise,
        /// Number of values to send.
        len: usize,
        /// `cape_agn` stage 2: the whitening W (`input_rows`×`input_cols` f64, column-major,
        /// little-endian, base64) every site projects its third moment by; absent otherwise.
        #[serde(default)]
        input: Option<String>,
        #[serde(default)]
        input_rows: usize,
        #[serde(default)]
        input_cols: usize,
        /// The stage's consistency round: true asks the site to confirm the stage's transcript
        /// (its roster and the calibration it derives) at `POST /v1/site/stages/{stage}/confirm`
        /// and release nothing yet; false asks for the release, with `confirmations`.
        #[serde(default)]
        confirm: bool,
        /// The roster's confirmations of the stage's transcript: a site releases only when
        /// ⌊(S + c)/2⌋ + 1 of them verify over its own transcript.
        #[serde(default)]
        confirmations: Vec<SiteSignature>,
    },
    /// `gossip_power`: post this agent's value for exchange `step` of `steps`, after mixing
    /// in `inputs`, its graph neighbours' values of exchange `step − 1` (none for step 1).
    GossipStep {
        step: u32,
        steps: u32,
        inputs: Vec<GossipValue>,
        /// Exchange 1: every agent's confirmation of the study's transcript (its roster and
        /// terms); an agent posts nothing unless all of them verify.
        #[serde(default)]
        confirmations: Vec<SiteSignature>,
    },
    /// `gossip_power`, before exchange 1: the roster of agents; fix it (its hash is printed
    /// and checked against `--expect-roster-hash`) and confirm the study's transcript at
    /// `POST /v1/site/stages/0/confirm`.
    GossipConfirm { agents: Vec<GossipAgent> },
    /// The study is over (for this site). `status` is the study status.
    Finished {
        #[schema(value_type = String)]
        status: StudyStatus,
        /// Why the study failed or this site was dropped, when it did.
        reason: Option<String>,
    },
}
