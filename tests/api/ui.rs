//! The dashboard at `/ui`: open without a key, every asset with its content type, caching and
//! security headers, and nothing that reaches outside the service.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use privpca::http::ui::{CONTENT_SECURITY_POLICY, asset_names};

use crate::helpers::TestApp;

fn expected_type(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        other => panic!("unexpected asset type {other:?}"),
    }
}

/// Every quoted `/ui/...` path an asset refers to (links, script sources, module imports).
fn referenced_paths(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for quote in ['"', '\''] {
        let needle = format!("{quote}/ui/");
        let mut rest = text;
        while let Some(at) = rest.find(&needle) {
            let tail = &rest[at + 1..];
            let end = tail.find(quote).unwrap();
            paths.push(tail[..end].to_string());
            rest = &tail[end..];
        }
    }
    paths
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_without_a_key_with_strict_headers() {
    let app = TestApp::without_runner().await;
    let mut paths = vec![("/ui".to_string(), "index.html")];
    paths.extend(asset_names().map(|n| (format!("/ui/{n}"), n)));
    assert!(paths.len() > 4, "html, scripts, a stylesheet and an icon");
    for (path, name) in &paths {
        let reply = app.anonymous(Method::GET, path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert_eq!(reply.content_type(), expected_type(name), "{path}");
        let h = |n: header::HeaderName| reply.headers.get(n).unwrap().to_str().unwrap().to_string();
        assert_eq!(h(header::CACHE_CONTROL), "no-cache", "{path}");
        assert_eq!(
            h(header::CONTENT_SECURITY_POLICY),
            CONTENT_SECURITY_POLICY,
            "{path}"
        );
        assert_eq!(h(header::X_CONTENT_TYPE_OPTIONS), "nosniff", "{path}");
        assert_eq!(h(header::REFERRER_POLICY), "no-referrer", "{path}");
        assert_eq!(h(header::X_FRAME_OPTIONS), "DENY", "{path}");
        assert!(!reply.bytes.is_empty(), "{path}");

        // A browser holding the current ETag revalidates to a body-less 304.
        let etag = h(header::ETAG);
        assert!(etag.starts_with('"') && etag.len() > 10, "{path}: {etag}");
        let request = Request::builder()
            .uri(path.as_str())
            .header(header::IF_NONE_MATCH, &etag)
            .body(Body::empty())
            .unwrap();
        let revalidated = app.send(request).await;
        assert_eq!(revalidated.status, StatusCode::NOT_MODIFIED, "{path}");
        assert!(revalidated.bytes.is_empty());
        let stale = Request::builder()
            .uri(path.as_str())
            .header(header::IF_NONE_MATCH, "\"not-it\"")
            .body(Body::empty())
            .unwrap();
        assert_eq!(app.send(stale).await.status, StatusCode::OK, "{path}");
    }
}

#[tokio::test]
async fn the_policy_allows_only_this_origin_and_no_inline_code() {
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ] {
        assert!(CONTENT_SECURITY_POLICY.contains(directive), "{directive}");
    }
    assert!(!CONTENT_SECURITY_POLICY.contains("unsafe"));
    assert!(!CONTENT_SECURITY_POLICY.contains("http"));

    let app = TestApp::without_runner().await;
    let page = String::from_utf8(app.anonymous(Method::GET, "/ui").await.bytes).unwrap();
    // Scripts come from files, never inline; no inline styles or event handlers.
    for tag in page.split("<script").skip(1) {
        let open = &tag[..tag.find('>').unwrap()];
        assert!(open.contains("src=\"/ui/"), "inline script: <script{open}>");
        assert!(tag[open.len() + 1..].trim_start().starts_with("</script>"));
    }
    assert!(!page.contains("style="));
    assert!(!page.contains("<style"));
    assert!(!page.contains(" onclick=") && !page.contains(" onload="));
}

#[tokio::test]
async fn nothing_refers_outside_the_service_and_every_reference_resolves() {
    let app = TestApp::without_runner().await;
    let mut references = Vec::new();
    for name in asset_names() {
        let text = String::from_utf8(
            app.call(Method::GET, &format!("/ui/{name}"), None, None)
                .await
                .bytes,
        )
        .unwrap();
        // The SVG namespace is a name, never fetched; any other absolute URL is external.
        let scrubbed = text.replace("http://www.w3.org/2000/svg", "");
        for external in [
            "http://", "https://", "ws://", "wss://", "\"//", "'//", "url(//", "@import",
        ] {
            assert!(!scrubbed.contains(external), "{name} refers to {external}");
        }
        for path in referenced_paths(&text) {
            assert!(!path.contains('?') && !path.contains("//"), "{name}: {path}");
            references.push((name, path));
        }
    }
    assert!(
        references.iter().any(|(_, p)| p == "/ui/app.js"),
        "the page loads its script"
    );
    assert!(
        references.iter().any(|(_, p)| p == "/ui/charts.js"),
        "modules import each other"
    );
    for (from, path) in references {
        let reply = app.anonymous(Method::GET, &path).await;
        assert_eq!(reply.status, StatusCode::OK, "{from} refers to {path}");
    }
}

#[tokio::test]
async fn unknown_assets_are_problem_documents_and_the_slash_redirects() {
    let app = TestApp::without_runner().await;
    app.anonymous(Method::GET, "/ui/nope.js").await.problem(404);
    app.anonymous(Method::GET, "/ui/..%2fCargo.toml")
        .await
        .problem(404);
    app.anonymous(Method::POST, "/ui").await.problem(405);
    let slash = app.anonymous(Method::GET, "/ui/").await;
    assert_eq!(slash.status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(slash.headers.get(header::LOCATION).unwrap(), "/ui");
}
