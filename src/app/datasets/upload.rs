//! The upload pipeline, step by step: the dataset must take data (`empty`, or `uploading` under
//! a lease that ran out); the body's format is named or sniffed; the dataset is held in the
//! database before any byte is read; the body streams through the parser (`crate::ingest`) on a
//! blocking thread into a temporary file; the store moves the file into place and marks the
//! dataset ready under the hold. A records upload builds its statistics (XᵀX, Xᵀ1, n) from the
//! rows as they stream, on a worker thread beside the parse (`crate::ingest::ingest_with_stats`),
//! and keeps them beside the data once it is attached, so that no job passes over the records;
//! a job that arrives before they are kept waits for them (`crate::stats_builds`). A failed
//! upload gives the dataset back `empty` and leaves no statistics.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use uuid::Uuid;

use super::synced_file::SyncedFile;
use super::upload_object;
use crate::app::error::{AppError, ErrorKind};
use crate::config::Config;
use crate::dataset::Kind;
use crate::ingest::stats_file::KeptStats;
use crate::ingest::{self, Format, IngestError, Ingested, Limits, Shape, SparseIngested, StreamedStats};
use crate::objects::{PartSink, Sha256Hex};
use crate::state::AppState;
use crate::stats_builds::StatsTurn;
use crate::store::{DatasetRecord, DatasetStatus, HeldUpload, UploadClaimOutcome};

/// An upload as it arrives: how the body names its format, its declared length and the body.
pub struct UploadRequest<'a, S> {
    /// The body's media type (`Content-Type`), if any; parameters such as `charset` are ignored.
    pub content_type: Option<&'a str>,
    /// The format named beside the media type (`?format=`), if any.
    pub format: Option<Format>,
    /// The length the client declared (`Content-Length`), if any: more than the limit is
    /// refused before anything is read.
    pub declared_bytes: Option<u64>,
    /// The body's bytes.
    pub body: S,
}

/// The media types an upload may have, as told to a client that sent another.
const UPLOAD_TYPES: &str = "application/octet-stream (a .npy file, or any format named by ?format=csv|json|npy|mtx), text/csv, application/json, application/x-npy or application/x-matrix-market";

/// Uploads a dataset's data, once: records are clipped to the declared bounds, a symmetric
/// matrix is checked for shape and symmetry (`crate::ingest`). Returns the dataset, ready.
pub async fn upload<S>(
    state: &AppState,
    tenant: Uuid,
    id: Uuid,
    request: UploadRequest<'_, S>,
) -> Result<DatasetRecord, AppError>
where
    S: Stream<Item = io::Result<Bytes>> + Send + Unpin + 'static,
{
    let record = super::get(state, tenant, id).await?;
    // An `uploading` dataset may be held by a replica that died; the claim below decides.
    if !matches!(record.status, DatasetStatus::Empty | DatasetStatus::Uploading) {
        return Err(not_uploadable(record.status));
    }
    let source = format_source(request.content_type, request.format)?;
    let limits = limits(&state.config);
    if request.declared_bytes.is_some_and(|len| len > limits.max_bytes) {
        return Err(AppError::new(
            ErrorKind::PayloadTooLarge,
            format!("upload is larger than the limit of {} bytes", limits.max_bytes),
        ));
    }
    let shape = shape(&record)?;
    let mut held = hold(state, tenant, id).await?;
    let temp = state.store.upload_temp_path(id);
    let max_nnz = state.config.max_nnz;
    // With an object store, the parser's output goes to the store as it is written, and is
    // there whole before the dataset can be ready; any failure gives the dataset back.
    let (object, sink) = match upload_object::begin(state, id).await {
        Ok(Some((object, sink))) => (Some(object), Some(sink)),
        Ok(None) => (None, None),
        Err(e) => {
            held.release().await;
            return Err(e);
        }
    };
    let parsed = parse(request.body, source, shape, (limits, max_nnz), temp.clone(), sink).await;
    let (stored, stored_object) = match upload_object::end(id, object, parsed, upload_problem).await {
        Ok(done) => done,
        Err(e) => {
            let _ = tokio::fs::remove_file(&temp).await;
            held.release().await;
            return Err(e);
        }
    };
    if let Some(object) = &stored_object {
        held.stored_in(object.clone());
    }
    // Taken before the dataset can be seen ready, so that a job arriving before the statistics
    // are kept waits for them (a fresh upload's dataset has no other holder).
    let turn = match &stored {
        Stored::Dense(..) if shape != Shape::SymmetricMatrix => Some(state.stats_builds.turn(id).await),
        _ => None,
    };
    // The store moves the file into place and marks the dataset ready in one step, if this
    // upload's claim still holds the dataset (else it removes the file).
    let (attached, stats) = match stored {
        Stored::Dense(ingested, stats) => (held.attach(&temp, ingested.n, ingested.d).await, stats),
        Stored::Sparse(sparse) => (held.attach_sparse(&temp, sparse.n, sparse.nnz).await, None),
    };
    let attached = upload_object::settle(state, id, stored_object, attached).await?;
    let record = attached.ok_or_else(|| {
        AppError::conflict(
            "the dataset was deleted during the upload, or this upload stalled past its lease and another upload took the dataset over",
        )
    })?;
    if let (Kind::Records, Some(turn)) = (record.kind, turn) {
        keep_statistics(state, &record, stats, turn);
    }
    Ok(record)
}

/// How the body's format will be known: named by the media type or beside it, or to be
/// sniffed from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FormatSource {
    Named(Format),
    Sniff,
}

/// An octet stream (or no media type) takes its format from `named`, else from its first
/// bytes; a specific media type names the format, and `named` must agree with it.
fn format_source(content_type: Option<&str>, named: Option<Format>) -> Result<FormatSource, AppError> {
    let unsupported = |detail: String| AppError::new(ErrorKind::UnsupportedMediaType, detail);
    let media_type = content_type
        .map(|ct| ct.split(';').next().unwrap_or_default().trim())
        .unwrap_or_default();
    if media_type.is_empty() || media_type.eq_ignore_ascii_case("application/octet-stream") {
        return Ok(named.map_or(FormatSource::Sniff, FormatSource::Named));
    }
    let format = Format::from_content_type(media_type).ok_or_else(|| {
        unsupported(format!(
            "unsupported Content-Type `{media_type}`; use {UPLOAD_TYPES}"
        ))
    })?;
    match named {
        Some(other) if other != format => Err(unsupported(format!(
            "Content-Type `{media_type}` and ?format={} disagree; name the format once",
            other.content_type()
        ))),
        _ => Ok(FormatSource::Named(format)),
    }
}

/// The configured upload limits.
fn limits(config: &Config) -> Limits {
    Limits {
        max_bytes: config.max_upload_bytes,
        max_rows: config.max_rows,
        max_d: config.max_d,
    }
}

/// What the data must be, with the public bounds that apply on the way in.
fn shape(record: &DatasetRecord) -> Result<Shape, AppError> {
    Ok(match record.kind {
        Kind::Records => Shape::Records {
            beta: record
                .row_norm_bound
                .ok_or_else(|| AppError::internal("records dataset without row bound"))?,
            alpha: record.row_l1_bound,
        },
        Kind::Matrix => Shape::SymmetricMatrix,
    })
}

/// Holds the dataset in the database before any data is read, so a second upload on any
/// replica is refused at once; the hold gives it back if this upload fails.
async fn hold(state: &AppState, tenant: Uuid, id: Uuid) -> Result<HeldUpload, AppError> {
    match state.store.claim_upload(tenant, id).await? {
        UploadClaimOutcome::Claimed(claim) => Ok(state.store.hold_upload(claim)),
        UploadClaimOutcome::Refused(status) => Err(not_uploadable(status)),
        UploadClaimOutcome::NotFound => Err(AppError::not_found("dataset", id)),
    }
}

/// What an upload stored: dense rows (with the records' statistics, built as they streamed),
/// or a sparse matrix (Matrix Market, `ingest::csr_file`).
enum Stored {
    Dense(Ingested, Option<StreamedStats>),
    Sparse(SparseIngested),
}

/// Why an upload was refused inside the blocking parse. It becomes the uploader's problem
/// document ([`upload_problem`]) only once the object store has had its say
/// ([`upload_object::end`]): a parse that failed because the store did is the store's 503, and
/// is not logged as an internal error on the way.
enum UploadFailure {
    /// An octet stream that is not `.npy` and names no format.
    Unrecognised,
    Ingest(IngestError),
    /// The parse's thread panicked.
    Crashed(tokio::task::JoinError),
}

/// The problem document of a failed parse.
fn upload_problem(failure: UploadFailure) -> AppError {
    match failure {
        UploadFailure::Ingest(e) => ingest_problem(e),
        UploadFailure::Unrecognised => AppError::new(
            ErrorKind::UnsupportedMediaType,
            format!(
                "this application/octet-stream body is neither a .npy file (no \\x93NUMPY magic) nor Matrix Market (no %%MatrixMarket banner); name its format with ?format=csv, ?format=json or ?format=mtx, or send it as {UPLOAD_TYPES}"
            ),
        ),
        UploadFailure::Crashed(e) => AppError::internal(e),
    }
}

/// Streams `body` through the parser on a blocking thread into `temp`, which is removed if the
/// parse fails.
async fn parse<S>(
    body: S,
    source: FormatSource,
    shape: Shape,
    (limits, max_nnz): (Limits, u64),
    temp: PathBuf,
    copy: Option<PartSink>,
) -> Result<(Stored, Option<Sha256Hex>), UploadFailure>
where
    S: Stream<Item = io::Result<Bytes>> + Send + Unpin + 'static,
{
    let reader = tokio_util::io::SyncIoBridge::new(tokio_util::io::StreamReader::new(body));
    let outcome =
        tokio::task::spawn_blocking(move || -> Result<(Stored, Option<Sha256Hex>), UploadFailure> {
            let (format, reader): (Format, Box<dyn io::Read>) = match source {
                FormatSource::Named(format) => (format, Box::new(reader)),
                FormatSource::Sniff => {
                    let (format, reader) = ingest::sniff::sniff(reader)
                        .map_err(|e| UploadFailure::Ingest(IngestError::Read(e)))?;
                    (format.ok_or(UploadFailure::Unrecognised)?, Box::new(reader))
                }
            };
            let written = write_upload(reader, format, shape, (&limits, max_nnz), &temp, copy);
            if written.is_err() {
                // Here rather than in the caller, which is gone if the client hung up.
                let _ = std::fs::remove_file(&temp);
            }
            written.map_err(UploadFailure::Ingest)
        })
        .await;
    outcome.unwrap_or_else(|e| Err(UploadFailure::Crashed(e)))
}

/// Parses an upload into its temporary file, synced to disk as it is written ([`SyncedFile`]): a
/// Matrix Market file for a matrix dataset is stored sparse, with at most `max_nnz` entries and
/// no dense side limit. With `copy` (the object store's sink) every byte also goes there, and
/// the SHA-256 of the whole is returned; the local file is then a cache copy, not synced.
fn write_upload(
    reader: Box<dyn io::Read>,
    format: Format,
    shape: Shape,
    (limits, max_nnz): (&Limits, u64),
    temp: &Path,
    copy: Option<PartSink>,
) -> Result<(Stored, Option<Sha256Hex>), IngestError> {
    let file = match copy {
        Some(_) => SyncedFile::unsynced(temp),
        None => SyncedFile::create(temp),
    }
    .map_err(IngestError::Io)?;
    let mut writer = io::BufWriter::with_capacity(1 << 20, Output { file, copy });
    let ingested = if format == Format::Mtx && shape == Shape::SymmetricMatrix {
        Stored::Sparse(ingest::ingest_mtx(
            reader,
            limits.max_bytes,
            max_nnz,
            &mut writer,
        )?)
    } else {
        let (ingested, stats) = ingest::ingest_with_stats(reader, format, shape, limits, &mut writer)?;
        Stored::Dense(ingested, stats)
    };
    let Output { file, copy } = writer.into_inner().map_err(|e| IngestError::Io(e.into_error()))?;
    file.finish().map_err(IngestError::Io)?;
    let sum = copy.map(PartSink::finish).transpose().map_err(IngestError::Io)?;
    Ok((ingested, sum))
}

/// The parser's output: the local file, and the object store's sink when there is one.
struct Output {
    file: SyncedFile,
    copy: Option<PartSink>,
}

impl io::Write for Output {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let written = self.file.write(bytes)?;
        if let Some(copy) = &mut self.copy {
            copy.write_all(&bytes[..written])?;
        }
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A parse failure as the uploader is told it: too large, bad data (naming the position, never
/// a value), or a server-side failure.
fn ingest_problem(e: IngestError) -> AppError {
    if matches!(e, IngestError::TooLarge { .. }) {
        return AppError::new(ErrorKind::PayloadTooLarge, e.to_string());
    }
    if e.is_client_error() {
        AppError::new(ErrorKind::Validation, format!("data rejected: {e}")).with_field("body")
    } else {
        AppError::internal(e)
    }
}

/// Why a dataset in this status takes no upload.
fn not_uploadable(status: DatasetStatus) -> AppError {
    match status {
        DatasetStatus::Ready => AppError::conflict(
            "this dataset already has data; datasets are immutable, create a new dataset to upload other data",
        ),
        DatasetStatus::Deleted => AppError::conflict("this dataset has been deleted"),
        DatasetStatus::Empty | DatasetStatus::Uploading => {
            AppError::conflict("an upload to this dataset is already in progress")
        }
    }
}

/// How long no job must have read a fresh dataset's records before its blocks for clipped jobs
/// are built.
const BLOCKS_AFTER_QUIET: Duration = Duration::from_millis(300);
/// The longest the blocks wait for that.
const BLOCKS_WAIT_LIMIT: Duration = Duration::from_secs(60);

/// Keeps a records dataset's statistics (XᵀX, Xᵀ1, n), built while its upload streamed, beside
/// its data, in the background, holding the dataset's `turn` until they are kept so that a job
/// arriving meanwhile waits and reads them. If the upload could not build them (its worker
/// failed), they are built here in one pass through the path jobs take too
/// (`ingest::stats_file::open_records`). Then, with the turn released, the blocks for clipped
/// jobs are added to the file (`ingest::stats_file::add_clip_blocks`). Nothing is returned to
/// anyone: the file sits beside the data and goes with it.
fn keep_statistics(
    state: &AppState,
    record: &DatasetRecord,
    streamed: Option<StreamedStats>,
    turn: StatsTurn,
) {
    let (Some(n), Some(d)) = (record.n, record.d) else {
        return;
    };
    let (n, d) = (n as usize, d as usize);
    let id = record.id;
    let data = state.store.data_path(id);
    let kept = state.store.stats_path(id);
    let temp = state.store.upload_temp_path(id);
    let builds = state.stats_builds.clone();
    let publish = StatsPublisher::new(state, id);
    tokio::task::spawn_blocking(move || {
        let written = match streamed {
            Some(streamed) if streamed.stats.fits(d, n) && streamed.norms.len() == n => {
                let written = ingest::stats_file::keep(&kept, &temp, &streamed.stats);
                // In this process's memory too, with the norms the upload computed: the first
                // job reads neither the file nor a single record for them.
                if written.is_ok() {
                    let in_memory = KeptStats::with_norms(streamed.stats, streamed.norms);
                    builds.keep(id, &std::sync::Arc::new(in_memory));
                }
                written
            }
            _ => ingest::stats_file::open_records(&data, &kept, &temp, (n, d), None)
                .and_then(|(_, e)| e.map_or(Ok(()), Err)),
        };
        if let Err(e) = written {
            // Deleted already, perhaps; else a job computes them (and reports a real read error).
            tracing::warn!(dataset = %id, error = %e, "could not keep the dataset's statistics; its first job computes them");
        }
        // A delete that removed the data while this ran: the statistics go with the data (a
        // delete after this check removes them itself).
        if !data.exists() {
            let _ = std::fs::remove_file(&kept);
            builds.forget(id);
        }
        drop(turn);
        publish.put(&kept);
        // Then the blocks for clipped jobs (`linalg::clip_blocks`), without the turn, once no
        // job of this process has read the records for a moment: the first job, which
        // typically follows the upload at once, reads the statistics kept above and, if it
        // clips, makes one clipping pass with both cores rather than sharing them with the
        // build's two passes. The file is replaced whole when the blocks are ready.
        builds.wait_unread(id, BLOCKS_AFTER_QUIET, BLOCKS_WAIT_LIMIT);
        match ingest::stats_file::add_clip_blocks(&data, &kept, &temp, n, d) {
            // The statistics kept in memory get the blocks too (with the norms they have).
            Ok(Some(blocks)) => {
                if let Some(in_memory) = builds.kept(id) {
                    builds.keep(id, &std::sync::Arc::new(in_memory.and_blocks(blocks)));
                }
                publish.put(&kept);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(dataset = %id, error = %e, "could not keep the blocks for clipped jobs; its clipped jobs make a full pass");
            }
        }
        if !data.exists() {
            let _ = std::fs::remove_file(&kept);
            builds.forget(id);
        }
    });
}

/// Stores a dataset's kept statistics in the object store from a blocking thread, if datasets
/// live there (a failure is logged: the statistics are derived, and a replica that finds none
/// builds them from the data).
pub struct StatsPublisher {
    objects: Option<(
        std::sync::Arc<crate::objects::ObjectStorage>,
        tokio::runtime::Handle,
    )>,
    dataset: Uuid,
}

impl StatsPublisher {
    /// Call it on the runtime.
    pub fn new(state: &AppState, dataset: Uuid) -> StatsPublisher {
        StatsPublisher {
            objects: state
                .objects
                .clone()
                .map(|objects| (objects, tokio::runtime::Handle::current())),
            dataset,
        }
    }

    /// Stores the statistics file at `kept`, if there is one (call it off the runtime).
    pub fn put(&self, kept: &Path) {
        let Some((objects, runtime)) = &self.objects else {
            return;
        };
        if !kept.exists() {
            return;
        }
        if let Err(e) = runtime.block_on(objects.put_stats(self.dataset, kept)) {
            tracing::warn!(dataset = %self.dataset, error = %e, "could not store the statistics in the object store; replicas without them build them");
        }
    }
}
