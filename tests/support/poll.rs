//! Waiting for something that happens in the background (a job ending, a file appearing) with a
//! deadline. Shared by the in-process API tests (`tests/api`, `#[path]`) and the process-level
//! suites (through `tests/support/mod.rs`).

use std::future::Future;
use std::time::{Duration, Instant};

/// Calls `check` every `every` until it returns `Ok`, and returns what it returned; panics with
/// the last `Err` (which says what was awaited and what was seen) once `limit` has passed.
pub async fn until<T, F, Fut>(limit: Duration, every: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match check().await {
            Ok(done) => return done,
            Err(state) => assert!(Instant::now() < deadline, "{state}"),
        }
        tokio::time::sleep(every).await;
    }
}
