use super::*;

#[test]
fn transient_statuses_are_retried_and_the_rest_are_not() {
    for code in [408, 429, 500, 502, 503, 504] {
        let status = StatusCode::from_u16(code).expect("status");
        assert_eq!(classify(status), Class::Transient, "{code}");
    }
    for code in [200, 201, 204] {
        let status = StatusCode::from_u16(code).expect("status");
        assert_eq!(classify(status), Class::Success, "{code}");
    }
    for code in [401, 403] {
        let status = StatusCode::from_u16(code).expect("status");
        assert_eq!(classify(status), Class::Unauthorized, "{code}");
    }
    for code in [400, 404, 405, 409, 410, 413, 422] {
        let status = StatusCode::from_u16(code).expect("status");
        assert_eq!(classify(status), Class::Protocol, "{code}");
    }
}

#[test]
fn only_an_already_received_conflict_counts_as_success() {
    assert!(is_already_received(StatusCode::CONFLICT, Some(ALREADY_RECEIVED)));
    assert!(!is_already_received(
        StatusCode::CONFLICT,
        Some("urn:privpca:problem:conflict")
    ));
    assert!(!is_already_received(StatusCode::CONFLICT, None));
    assert!(!is_already_received(
        StatusCode::UNPROCESSABLE_ENTITY,
        Some(ALREADY_RECEIVED)
    ));
}

#[test]
fn problems_are_described_by_their_detail() {
    let body = br#"{"type":"urn:privpca:problem:conflict","title":"Conflict","status":409,"detail":"the study is no longer enrolling"}"#;
    let (kind, message) = describe(StatusCode::CONFLICT, body);
    assert_eq!(kind.as_deref(), Some("urn:privpca:problem:conflict"));
    assert_eq!(message, "the study is no longer enrolling");
    let (kind, message) = describe(StatusCode::BAD_GATEWAY, b"<html>bad gateway</html>");
    assert_eq!(kind, None);
    assert_eq!(message, "<html>bad gateway</html>");
    let (_, message) = describe(StatusCode::NOT_FOUND, b"");
    assert_eq!(message, "Not Found");
}

#[test]
fn backoff_doubles_to_ten_seconds_with_jitter_and_gives_up() {
    let mut backoff = Backoff::new(Duration::from_secs(3600));
    let mut tops = Vec::new();
    for _ in 0..10 {
        let top = backoff.next;
        let delay = backoff.delay(None).expect("not yet");
        assert!(delay >= top / 2 && delay <= top, "{delay:?} vs {top:?}");
        tops.push(top);
    }
    assert_eq!(tops[0], Duration::from_millis(250));
    assert_eq!(tops[1], Duration::from_millis(500));
    assert_eq!(*tops.last().expect("tops"), Duration::from_secs(10));
    let hinted = backoff.delay(Some(Duration::from_secs(30))).expect("not yet");
    assert_eq!(hinted, Duration::from_secs(30));
    let capped = backoff.delay(Some(Duration::from_secs(3600))).expect("not yet");
    assert_eq!(capped, RETRY_AFTER_MAX);
    let mut expired = Backoff::new(Duration::ZERO);
    assert_eq!(expired.delay(None), None);
}

#[test]
fn paths_keep_the_base_prefix_and_their_query() {
    let client = |base: &str| {
        SiteClient::new(
            Url::parse(base).expect("url"),
            "t".to_owned(),
            Duration::from_secs(1),
        )
        .expect("client")
    };
    let plain = client("http://127.0.0.1:8080");
    assert_eq!(
        plain.url("/v1/site/task?wait_ms=20000").as_str(),
        "http://127.0.0.1:8080/v1/site/task?wait_ms=20000"
    );
    let prefixed = client("https://example.org/privpca/");
    assert_eq!(
        prefixed.url("/v1/site/study").as_str(),
        "https://example.org/privpca/v1/site/study"
    );
}

/// A server on a free local port: `/flaky` answers 503 once and then 409 conflict,
/// `/received` 409 already-received, `/conflict` 409 conflict, `/token` 401, `/task`
/// 429 once and then a JSON body.
async fn fake_server() -> Url {
    use axum::http::{HeaderValue, header};
    use axum::response::IntoResponse;
    use axum::routing::{get, post};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn problem(status: StatusCode, slug: &str, detail: &str) -> axum::response::Response {
        let body = serde_json::json!({
            "type": format!("urn:privpca:problem:{slug}"),
            "title": "t",
            "status": status.as_u16(),
            "detail": detail,
        });
        let mut response = (status, body.to_string()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        response
    }
    let flaky = Arc::new(AtomicU32::new(0));
    let task = Arc::new(AtomicU32::new(0));
    let app = axum::Router::new()
        .route(
            "/flaky",
            post(move || {
                let flaky = flaky.clone();
                async move {
                    if flaky.fetch_add(1, Ordering::SeqCst) == 0 {
                        StatusCode::SERVICE_UNAVAILABLE.into_response()
                    } else {
                        problem(StatusCode::CONFLICT, "conflict", "the phase moved on")
                    }
                }
            }),
        )
        .route(
            "/received",
            post(|| async { problem(StatusCode::CONFLICT, "already-received", "seen") }),
        )
        .route(
            "/conflict",
            post(|| async { problem(StatusCode::CONFLICT, "conflict", "not enrolling") }),
        )
        .route(
            "/token",
            post(|| async { problem(StatusCode::UNAUTHORIZED, "unauthorized", "unknown site token") }),
        )
        .route(
            "/task",
            get(move || {
                let task = task.clone();
                async move {
                    if task.fetch_add(1, Ordering::SeqCst) == 0 {
                        let mut r = StatusCode::TOO_MANY_REQUESTS.into_response();
                        r.headers_mut()
                            .insert(header::RETRY_AFTER, HeaderValue::from_static("0"));
                        r
                    } else {
                        (StatusCode::OK, r#"{"task":"wait","status":"enrolling"}"#).into_response()
                    }
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    Url::parse(&format!("http://{addr}")).expect("url")
}

#[tokio::test]
async fn answers_are_classified_and_transient_ones_retried() {
    let base = fake_server().await;
    let client = SiteClient::new(base, "t".to_owned(), Duration::from_secs(20)).expect("client");
    let body = serde_json::json!({});
    assert_eq!(client.post("/received", &body).await, Ok(Posted::AlreadyReceived));
    assert_eq!(
        client.post("/flaky", &body).await,
        Ok(Posted::ConflictAfterRetry("the phase moved on".to_owned()))
    );
    let conflict = client.post("/conflict", &body).await.expect_err("conflict");
    assert!(
        matches!(&conflict, HttpError::Protocol { status: Some(StatusCode::CONFLICT), message, .. }
            if message == "not enrolling"),
        "{conflict:?}"
    );
    let token = client.post("/token", &body).await.expect_err("401");
    assert_eq!(token, HttpError::Unauthorized("unknown site token".to_owned()));
    let task: serde_json::Value = client.get("/task", Duration::ZERO).await.expect("after a 429");
    assert_eq!(task["task"], "wait");
    let missing = client.get::<serde_json::Value>("/nothing", Duration::ZERO).await;
    assert!(matches!(
        missing,
        Err(HttpError::Protocol {
            status: Some(StatusCode::NOT_FOUND),
            ..
        })
    ));
}

#[tokio::test]
async fn an_unreachable_server_is_retried_then_given_up() {
    // A port nobody listens on: bind, note the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let base = Url::parse(&format!("http://127.0.0.1:{port}")).expect("url");
    let client = SiteClient::new(base, "t".to_owned(), Duration::from_millis(600)).expect("client");
    let err = client
        .get::<serde_json::Value>("/v1/site/study", Duration::ZERO)
        .await
        .expect_err("nobody listens");
    assert!(matches!(err, HttpError::GaveUp { .. }), "{err:?}");
}
