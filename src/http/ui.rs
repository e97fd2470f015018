//! The budget dashboard at `/ui`: a static page whose script reads the JSON API with the
//! tenant's key (kept in the tab's sessionStorage, never in a URL or a cookie).
//!
//! The assets live in `assets/ui/` and are embedded at build time, so the dashboard works
//! offline and the binary is the whole deployment. Every asset is served with a strict
//! Content-Security-Policy (scripts, styles and requests from this origin only, no inline
//! script or style, no framing, no form submission), `Cache-Control: no-cache` and an ETag
//! of its content, so browsers revalidate cheaply and never run a stale script.

use std::sync::LazyLock;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use sha2::{Digest, Sha256};

use super::error::{ApiError, Path, ProblemKind};

/// The policy every dashboard response carries. `form-action 'none'` also means a key form
/// can never be submitted as a GET that would put the key in a URL, even if the script fails.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

impl Asset {
    const fn new(name: &'static str, content_type: &'static str, body: &'static [u8]) -> Self {
        Self {
            name,
            content_type,
            body,
        }
    }
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

const ASSETS: &[Asset] = &[
    Asset::new("index.html", HTML, include_bytes!("../../assets/ui/index.html")),
    Asset::new("app.js", JS, include_bytes!("../../assets/ui/app.js")),
    Asset::new("api.js", JS, include_bytes!("../../assets/ui/api.js")),
    Asset::new("charts.js", JS, include_bytes!("../../assets/ui/charts.js")),
    Asset::new("format.js", JS, include_bytes!("../../assets/ui/format.js")),
    Asset::new("studies.js", JS, include_bytes!("../../assets/ui/studies.js")),
    Asset::new("app.css", CSS, include_bytes!("../../assets/ui/app.css")),
    Asset::new("icon.svg", SVG, include_bytes!("../../assets/ui/icon.svg")),
];

/// Strong ETags of the assets' contents, in `ASSETS` order.
static ETAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            let digest = Sha256::digest(a.body);
            HeaderValue::from_str(&format!("\"{}\"", hex::encode(&digest[..16])))
                .expect("hex is a valid header value")
        })
        .collect()
});

/// The names of the embedded assets (for tests and the page's own links).
pub fn asset_names() -> impl Iterator<Item = &'static str> {
    ASSETS.iter().map(|a| a.name)
}

/// `GET /ui`: the dashboard page.
pub async fn index(headers: HeaderMap) -> Response {
    serve(0, &headers)
}

/// `GET /ui/`: the canonical address has no trailing slash.
pub async fn index_slash() -> Redirect {
    Redirect::permanent("/ui")
}

/// `GET /ui/{asset}`: one embedded asset, or a 404 problem document.
pub async fn asset(Path(name): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().position(|a| a.name == name) {
        Some(i) => serve(i, &headers),
        None => ApiError::new(ProblemKind::NotFound, "no such dashboard asset").into_response(),
    }
}

fn serve(i: usize, request: &HeaderMap) -> Response {
    let asset = &ASSETS[i];
    let etag = ETAGS[i].clone();
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        asset.body.into_response()
    };
    let headers = response.headers_mut();
    if !fresh {
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    }
    headers.insert(header::ETAG, etag);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    response
}
