//! The OpenAPI document, generated from the handlers' annotations. Committed at
//! `openapi/openapi.json` (regenerate with `privpca openapi > openapi/openapi.json`); a test
//! fails when the committed copy drifts.

use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{catalog, datasets, error, jobs, meta, privacy_input, site, studies, tenants};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "privpca",
        description = "Private PCA as a service: principal components under differential privacy, with a zCDP \
                       budget ledger per dataset. Errors are RFC 9457 problem documents.",
        license(name = "Apache-2.0")
    ),
    paths(
        tenants::create,
        datasets::create, datasets::list, datasets::get, datasets::delete, datasets::ledger, datasets::upload,
        jobs::submit, jobs::list, jobs::get, jobs::cancel, jobs::result,
        studies::create, studies::list, studies::get, studies::cancel, studies::result,
        site::study, site::join, site::task, site::shares, site::contribution, site::unmask, site::cape_release,
        catalog::list, catalog::plan,
        meta::healthz, meta::readyz, meta::metrics,
    ),
    components(schemas(error::ProblemDocument, privacy_input::BudgetInput, privacy_input::PrivacyInput,
        privacy_input::PrivacyAmount)),
    modifiers(&Security),
    tags(
        (name = "tenants", description = "Tenants and API keys (admin)"),
        (name = "datasets", description = "Datasets, uploads, budgets and ledgers"),
        (name = "jobs", description = "Private PCA jobs"),
        (name = "studies", description = "Multi-site studies: the data stays at the sites, which run `privpca site`"),
        (name = "sites", description = "The site protocol (site tokens only; used by `privpca site`)"),
        (name = "algorithms", description = "What can run"),
        (name = "privacy", description = "Data-free planning"),
        (name = "meta", description = "Health, readiness, metrics"),
    )
)]
pub struct ApiDoc;

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("api_key", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
        components.add_security_scheme(
            "site_token",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
        components.add_security_scheme(
            "admin_key",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// The document as committed: pretty JSON with a trailing newline.
pub fn document() -> String {
    let mut text = ApiDoc::openapi().to_pretty_json().unwrap_or_default();
    text.push('\n');
    text
}
