//! The site's HTTP client: JSON over `/v1/site/*` with the site token as a bearer token, and
//! retries with jittered exponential backoff for everything transient.
//!
//! Classification of an answer (see [`classify`]): 2xx is success; connection errors,
//! timeouts, a body that broke off, 408, 429 and 5xx are transient (retried, 250 ms doubling
//! to 10 s, jittered, honouring `Retry-After` up to a minute, until the give-up time of
//! consecutive failures has passed); 401 and 403 mean the token is refused; every other status
//! is a protocol violation reported with the problem document's `detail`. A POST answered 409
//! with problem type [`ALREADY_RECEIVED`] was received before (an earlier attempt got through)
//! and counts as success; so does any 409 to a POST that had to be sent again (its first
//! attempt may have got through and moved the study on): the next task tells the truth, and
//! the client never computes anything twice, so going on is safe.

use std::time::{Duration, Instant};

use rand::Rng;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{Client, Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::progress;

/// The problem type of a 409 that repeats an already received message.
pub const ALREADY_RECEIVED: &str = "urn:privpca:problem:already-received";

/// First backoff delay.
const BACKOFF_START: Duration = Duration::from_millis(250);
/// Largest backoff delay.
const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// Largest wait honoured from a `Retry-After` header.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(60);
/// Timeout of one request (long polls add their wait to it).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest excerpt of a non-problem error body shown to the operator.
const EXCERPT: usize = 300;

/// How an HTTP status is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Success,
    /// Retry later.
    Transient,
    /// 401/403: the token is refused.
    Unauthorized,
    /// Any other status: the request broke the protocol (or the study moved on).
    Protocol,
}

/// How a status is handled.
pub fn classify(status: StatusCode) -> Class {
    match status.as_u16() {
        200..=299 => Class::Success,
        408 | 429 | 500..=599 => Class::Transient,
        401 | 403 => Class::Unauthorized,
        _ => Class::Protocol,
    }
}

/// Why a request did not succeed.
#[derive(Debug, Clone, PartialEq)]
pub enum HttpError {
    /// The server refused the token.
    Unauthorized(String),
    /// The server refused the request (or answered something unreadable).
    Protocol {
        status: Option<StatusCode>,
        problem_type: Option<String>,
        message: String,
    },
    /// The network kept failing for longer than the give-up time.
    GaveUp {
        what: String,
        last: String,
        elapsed: Duration,
    },
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Unauthorized(message) => write!(f, "the server refused the site token: {message}"),
            HttpError::Protocol {
                status: Some(status),
                message,
                ..
            } => write!(f, "{status}: {message}"),
            HttpError::Protocol { message, .. } => write!(f, "{message}"),
            HttpError::GaveUp { what, last, elapsed } => write!(
                f,
                "gave up on {what} after {:.0} s of network failures; last error: {last}",
                elapsed.as_secs_f64()
            ),
        }
    }
}

/// An RFC 9457 problem document, as far as the client reads it.
#[derive(Debug, Default, serde::Deserialize)]
struct Problem {
    #[serde(rename = "type")]
    type_: Option<String>,
    title: Option<String>,
    detail: Option<String>,
}

/// `(problem type, message)` of an error answer: the problem's detail (or title), else an
/// excerpt of the body, else the status text.
fn describe(status: StatusCode, body: &[u8]) -> (Option<String>, String) {
    let problem: Problem = serde_json::from_slice(body).unwrap_or_default();
    let message = problem
        .detail
        .clone()
        .or(problem.title.clone())
        .unwrap_or_else(|| {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            if text.is_empty() {
                status.canonical_reason().unwrap_or("error").to_owned()
            } else {
                text.chars().take(EXCERPT).collect()
            }
        });
    (problem.type_, message)
}

/// Whether a failed POST was in fact received before.
pub fn is_already_received(status: StatusCode, problem_type: Option<&str>) -> bool {
    status == StatusCode::CONFLICT && problem_type == Some(ALREADY_RECEIVED)
}

/// Jittered exponential backoff over one run of consecutive failures.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
    started: Instant,
    give_up: Duration,
}

impl Backoff {
    pub fn new(give_up: Duration) -> Backoff {
        Backoff {
            next: BACKOFF_START,
            started: Instant::now(),
            give_up,
        }
    }

    /// The delay before the next attempt (uniform in [next/2, next], at least `at_least`
    /// capped to a minute), or `None` once the failures have lasted longer than the give-up
    /// time.
    /// Never sleeps past the give-up time: the last attempt is made then.
    pub fn delay(&mut self, at_least: Option<Duration>) -> Option<Duration> {
        let remaining = self
            .give_up
            .checked_sub(self.started.elapsed())
            .filter(|r| !r.is_zero())?;
        let top = self.next;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        let jittered = rand::rng().random_range(top / 2..=top);
        Some(
            jittered
                .max(at_least.unwrap_or_default().min(RETRY_AFTER_MAX))
                .min(remaining),
        )
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// `Retry-After` in seconds (the HTTP-date form is ignored).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers.get(RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds))
}

/// What a POST came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Posted {
    /// Accepted now.
    Accepted,
    /// 409 already-received: an earlier attempt got through.
    AlreadyReceived,
    /// Another 409, but only after the request had to be sent again: it may answer the state
    /// an earlier attempt that got through left behind (e.g. the phase moved on once every
    /// site's message arrived). The caller goes on: its next task says what the server has.
    ConflictAfterRetry(String),
}

/// An answer: status, body, and whether an earlier attempt of the same request may have
/// reached the server.
struct Answer {
    status: StatusCode,
    body: Vec<u8>,
    retried: bool,
}

/// The coordinator, as seen by one site.
pub struct SiteClient {
    http: Client,
    base: Url,
    token: String,
    give_up: Duration,
    traffic: TrafficCounter,
}

/// What a site exchanged with the coordinator: requests sent (every attempt) and the bytes of
/// the request and answer bodies (headers not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    pub requests: u64,
    pub sent: u64,
    pub received: u64,
}

#[derive(Default)]
struct TrafficCounter {
    requests: std::sync::atomic::AtomicU64,
    sent: std::sync::atomic::AtomicU64,
    received: std::sync::atomic::AtomicU64,
}

impl TrafficCounter {
    fn add(counter: &std::sync::atomic::AtomicU64, n: usize) {
        counter.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

impl SiteClient {
    pub fn new(base: Url, token: String, give_up: Duration) -> Result<SiteClient, String> {
        let http = Client::builder()
            .user_agent(concat!("privpca-site/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(SiteClient {
            http,
            base,
            token,
            give_up,
            traffic: TrafficCounter::default(),
        })
    }

    /// What this client has exchanged so far.
    pub fn traffic(&self) -> Traffic {
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        Traffic {
            requests: load(&self.traffic.requests),
            sent: load(&self.traffic.sent),
            received: load(&self.traffic.received),
        }
    }

    fn url(&self, path: &str) -> Url {
        // `path` is absolute (`/v1/...`): it replaces the base's path, keeping a prefix the
        // base may have (`https://host/privpca/`).
        let prefix = self.base.path().trim_end_matches('/');
        let mut url = self.base.clone();
        let (path, query) = path.split_once('?').map_or((path, None), |(p, q)| (p, Some(q)));
        url.set_path(&format!("{prefix}{path}"));
        url.set_query(query);
        url
    }

    /// Sends one request until it gets a non-transient answer or the network gives up.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Answer, HttpError> {
        let url = self.url(path);
        let what = format!("{method} {path}");
        let mut backoff: Option<Backoff> = None;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let mut request = self
                .http
                .request(method.clone(), url.clone())
                .bearer_auth(&self.token)
                .timeout(timeout)
                .header(reqwest::header::ACCEPT, "application/json");
            TrafficCounter::add(&self.traffic.requests, 1);
            TrafficCounter::add(&self.traffic.sent, body.map_or(0, <[u8]>::len));
            if let Some(body) = body {
                request = request
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.to_vec());
            }
            let (failure, wait_hint) = match request.send().await {
                Ok(response) => {
                    let status = response.status();
                    let hint = retry_after(response.headers());
                    let answer = response.bytes().await;
                    if let Ok(bytes) = &answer {
                        TrafficCounter::add(&self.traffic.received, bytes.len());
                    }
                    match answer {
                        Ok(bytes) if classify(status) != Class::Transient => {
                            return Ok(Answer {
                                status,
                                body: bytes.to_vec(),
                                retried: attempts > 1,
                            });
                        }
                        Ok(bytes) => (format!("{status}: {}", describe(status, &bytes).1), hint),
                        Err(e) => (format!("the answer broke off: {e}"), hint),
                    }
                }
                Err(e) if e.is_builder() => {
                    return Err(HttpError::Protocol {
                        status: None,
                        problem_type: None,
                        message: format!("cannot send {what}: {e}"),
                    });
                }
                Err(e) => (error_chain(&e), None),
            };
            let backoff = backoff.get_or_insert_with(|| Backoff::new(self.give_up));
            match backoff.delay(wait_hint) {
                Some(delay) => {
                    progress(&format!(
                        "{what} failed ({failure}); retrying in {:.1} s",
                        delay.as_secs_f64()
                    ));
                    tokio::time::sleep(delay).await;
                }
                None => {
                    return Err(HttpError::GaveUp {
                        what,
                        last: failure,
                        elapsed: backoff.elapsed(),
                    });
                }
            }
        }
    }

    /// The error of a non-success answer.
    fn refusal(answer: &Answer) -> HttpError {
        let (problem_type, message) = describe(answer.status, &answer.body);
        match classify(answer.status) {
            Class::Unauthorized => HttpError::Unauthorized(message),
            _ => HttpError::Protocol {
                status: Some(answer.status),
                problem_type,
                message,
            },
        }
    }

    fn decode<T: DeserializeOwned>(answer: &Answer, what: &str) -> Result<T, HttpError> {
        serde_json::from_slice(&answer.body).map_err(|e| HttpError::Protocol {
            status: Some(answer.status),
            problem_type: None,
            message: format!("the answer to {what} is not what the protocol expects: {e}"),
        })
    }

    /// GET `path` and decode its JSON answer. `extra` lengthens the timeout (long polls).
    pub async fn get<T: DeserializeOwned>(&self, path: &str, extra: Duration) -> Result<T, HttpError> {
        let answer = self
            .send(Method::GET, path, None, REQUEST_TIMEOUT + extra)
            .await?;
        if classify(answer.status) != Class::Success {
            return Err(Self::refusal(&answer));
        }
        Self::decode(&answer, path)
    }

    /// POST `body` as JSON to `path`, expecting no content back. A 409 already-received
    /// counts as success.
    pub async fn post<B: Serialize>(&self, path: &str, body: &B) -> Result<Posted, HttpError> {
        let answer = self.post_raw(path, body).await?;
        if classify(answer.status) == Class::Success {
            return Ok(Posted::Accepted);
        }
        let err = Self::refusal(&answer);
        match &err {
            HttpError::Protocol {
                status: Some(status),
                problem_type,
                ..
            } if is_already_received(*status, problem_type.as_deref()) => Ok(Posted::AlreadyReceived),
            HttpError::Protocol {
                status: Some(StatusCode::CONFLICT),
                message,
                ..
            } if answer.retried => Ok(Posted::ConflictAfterRetry(message.clone())),
            _ => Err(err),
        }
    }

    /// POST `body` as JSON to `path` and decode the JSON answer. A refusal comes with whether
    /// the request had to be sent more than once: then an earlier attempt may have got through
    /// and the refusal may be its echo.
    pub async fn post_for<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, (HttpError, bool)> {
        let answer = self.post_raw(path, body).await.map_err(|e| (e, false))?;
        if classify(answer.status) != Class::Success {
            return Err((Self::refusal(&answer), answer.retried));
        }
        Self::decode(&answer, path).map_err(|e| (e, false))
    }

    async fn post_raw<B: Serialize>(&self, path: &str, body: &B) -> Result<Answer, HttpError> {
        let bytes = serde_json::to_vec(body).map_err(|e| HttpError::Protocol {
            status: None,
            problem_type: None,
            message: format!("cannot encode the request to {path}: {e}"),
        })?;
        self.send(Method::POST, path, Some(&bytes), REQUEST_TIMEOUT).await
    }
}

/// An error with its causes, e.g. "error sending request: connection refused".
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
