//! Every route of the API, stated once: each handler is registered with its method and path
//! taken from its own `#[utoipa::path]`, which also adds its operation to the OpenAPI document
//! (`utoipa_axum::routes!`). The routes come in groups because the groups get different
//! limits (body size, time; [`super::router`]); the OpenAPI document is the groups' operations
//! merged (`openapi.rs`).

use axum::Router;
use axum::routing::get;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{catalog, datasets, jobs, ledger_log, meta, site, studies, tenant_keys, tenants, ui};
use crate::state::AppState;

/// The documented routes, by the limits they share. Destructure it to give each group its
/// layers, so that a new group cannot be forgotten there; [`Groups::merge`] joins them.
pub struct Groups {
    /// JSON requests of ordinary size and duration.
    pub api: OpenApiRouter<AppState>,
    /// The site protocol: large contributions and a long-polled task.
    pub site: OpenApiRouter<AppState>,
    /// Data uploads: streamed, unbounded bodies with their own time limit.
    pub uploads: OpenApiRouter<AppState>,
}

impl Groups {
    /// Every documented route, without layers.
    pub fn new() -> Self {
        Self {
            api: api(),
            site: site(),
            uploads: uploads(),
        }
    }

    /// One router (and one document) of all groups.
    pub fn merge(self) -> OpenApiRouter<AppState> {
        self.api.merge(self.site).merge(self.uploads)
    }
}

impl Default for Groups {
    fn default() -> Self {
        Self::new()
    }
}

/// Tenants, datasets, jobs, studies, the catalogue, planning, health. No `/metrics` here:
/// operators scrape their own listener (`operator.rs`, `--metrics-bind`).
fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(tenants::create))
        .routes(routes!(tenant_keys::rotate, tenant_keys::revoke))
        .routes(routes!(datasets::create, datasets::list))
        .routes(routes!(datasets::get, datasets::delete))
        .routes(routes!(datasets::ledger))
        .routes(routes!(ledger_log::checkpoint))
        .routes(routes!(ledger_log::consistency))
        .routes(routes!(ledger_log::study_checkpoint))
        .routes(routes!(ledger_log::study_consistency))
        .routes(routes!(ledger_log::ledger_key))
        .routes(routes!(jobs::submit, jobs::list))
        .routes(routes!(jobs::get, jobs::cancel))
        .routes(routes!(jobs::result))
        .routes(routes!(studies::create, studies::list))
        .routes(routes!(studies::get, studies::cancel))
        .routes(routes!(studies::result))
        .routes(routes!(catalog::list))
        .routes(routes!(catalog::plan))
        .routes(routes!(meta::healthz))
        .routes(routes!(meta::readyz))
}

/// The site protocol (site tokens; used by `privpca site`).
fn site() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(site::study))
        .routes(routes!(site::join))
        .routes(routes!(site::task))
        .routes(routes!(site::shares))
        .routes(routes!(site::seed))
        .routes(routes!(site::contribution))
        .routes(routes!(site::confirm))
        .routes(routes!(site::unmask))
        .routes(routes!(site::cape_release))
        .routes(routes!(site::stage_confirm))
        .routes(routes!(site::gossip_value))
        .routes(routes!(site::ledger_checkpoint))
        .routes(routes!(site::ledger_consistency))
}

/// `PUT /v1/datasets/{id}/data`.
fn uploads() -> OpenApiRouter<AppState> {
    OpenApiRouter::default().routes(routes!(datasets::upload))
}

/// The budget dashboard: static, embedded assets (not API operations, so not documented); the
/// page itself calls the API.
pub fn dashboard() -> Router<AppState> {
    Router::new()
        .route("/ui", get(ui::index))
        .route("/ui/", get(ui::index_slash))
        .route("/ui/{asset}", get(ui::asset))
}
