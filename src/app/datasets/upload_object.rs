//! The object-store side of an upload (issue 40, docs/design/object-storage.md): the data object
//! is written while the body is parsed ([`begin`] hands the parser a sink), it must be whole
//! before the dataset can be ready ([`end`]), and after the attach it is either the dataset's
//! data or removed ([`settle`]). Without an object store each step does nothing.

use uuid::Uuid;

use crate::app::error::{AppError, ErrorKind};
use crate::objects::{PartSink, PutOutcome, PutTask, Sha256Hex};
use crate::state::AppState;
use crate::store::{DataObject, DatasetRecord, StoreError};

/// An upload's data object while the parser writes it.
pub(super) struct ObjectUpload {
    key: String,
    task: PutTask,
}

/// What the uploader is told when the store fails: the upload may be sent again.
fn unavailable(id: Uuid, e: &dyn std::fmt::Display) -> AppError {
    tracing::warn!(dataset = %id, error = %e, "could not store an upload in the object store");
    AppError::new(
        ErrorKind::Unavailable,
        "the object store is unavailable; nothing of this upload was kept, send it again once the store is back",
    )
}

/// Starts the upload's data object under a new key of the dataset's, if datasets live in the
/// object store; the sink is the parser's second output. An unreachable store is a 503 before
/// any byte of the body is read.
pub(super) async fn begin(state: &AppState, id: Uuid) -> Result<Option<(ObjectUpload, PartSink)>, AppError> {
    let Some(objects) = &state.objects else {
        return Ok(None);
    };
    let key = objects.new_data_key(id);
    match objects.begin_put(&key).await {
        Ok((sink, task)) => Ok(Some((ObjectUpload { key, task }, sink))),
        Err(e) => Err(unavailable(id, &e)),
    }
}

/// After the parse (which returns the SHA-256 of what it wrote to the sink): the data object,
/// once the store has every part of it. A parse that failed because the store did is the
/// store's 503, not the parser's error (which is then never turned into a problem, so never
/// logged as one); any other failed parse keeps its own error (`problem`), at once (its sink
/// was dropped unfinished, so the task aborts the upload in the background).
pub(super) async fn end<T, E>(
    id: Uuid,
    upload: Option<ObjectUpload>,
    parsed: Result<(T, Option<Sha256Hex>), E>,
    problem: impl FnOnce(E) -> AppError,
) -> Result<(T, Option<DataObject>), AppError> {
    let Some(ObjectUpload { key, task }) = upload else {
        return parsed.map(|(stored, _)| (stored, None)).map_err(problem);
    };
    let (stored, sum) = match parsed {
        Ok(parsed) => parsed,
        Err(_) if task.store_failed() => return Err(unavailable(id, &"a part could not be stored")),
        Err(e) => return Err(problem(e)),
    };
    match (sum, task.outcome().await) {
        (Some(sum), Ok(PutOutcome::Stored)) => Ok((
            stored,
            Some(DataObject {
                key,
                sha256: sum.to_string(),
            }),
        )),
        (_, Err(e)) => Err(unavailable(id, &e)),
        (_, Ok(_)) => Err(AppError::internal(
            "the upload's data object ended without being stored",
        )),
    }
}

/// After the attach: the stored object is the dataset's data (the cache counts the attached
/// file, and this replica remembers the object), or, when the upload did not attach, it is
/// removed from the store.
pub(super) async fn settle(
    state: &AppState,
    id: Uuid,
    object: Option<DataObject>,
    attached: Result<Option<DatasetRecord>, StoreError>,
) -> Result<Option<DatasetRecord>, AppError> {
    let (Some(objects), Some(object)) = (&state.objects, object) else {
        return Ok(attached?);
    };
    match &attached {
        Ok(Some(_)) => {
            if let Some(sum) = Sha256Hex::parse(&object.sha256) {
                objects.cache().insert(&state.store.data_path(id), sum);
            }
            objects.know_data(id, &object);
        }
        _ => {
            if let Err(e) = objects.remove_key(&object.key).await {
                tracing::warn!(dataset = %id, error = %e, "could not remove the object of an upload that did not attach; the dataset's deletion removes it");
            }
        }
    }
    Ok(attached?)
}
