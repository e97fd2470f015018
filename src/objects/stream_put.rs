//! A multipart upload fed by a blocking writer, while it writes ([`ObjectStorage::begin_put`]).
//!
//! An upload's parser writes the stored data once; the same bytes go to the replica's local
//! file and, in parts, to the object store while the parse goes on. An upload then costs the
//! longer of the parse and the transfer, not their sum, and the SHA-256 is computed on the way
//! instead of in a second pass over the file (issue 40, docs/design/object-storage.md).
//!
//! [`PartSink`] runs on the parser's blocking thread: it hashes what it is given, cuts it into
//! [`PART_BYTES`] parts and hands each to an async task over a channel that holds one part, so
//! a slow store slows the parser down (at most about `(PARTS_IN_FLIGHT + 3) × PART_BYTES` is in
//! memory; the part buffers are reused). [`PutTask`] completes the multipart upload only after
//! [`PartSink::finish`]; a sink dropped before that (the parse failed, the client went away) or
//! a failing store aborts it, so nothing is left under the key.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use object_store::{MultipartUpload, WriteMultipart};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::digest::Hasher;
use super::{ObjectsError, PART_BYTES, PARTS_IN_FLIGHT, Sha256Hex};

/// What the sink sends its task.
enum Message {
    Part(Bytes),
    /// Everything was sent: complete the upload.
    End,
}

/// The writing end of a streamed multipart upload (module doc). Every write is hashed and
/// queued; an error means the store failed and the task has ended (its outcome says why).
pub struct PartSink {
    parts: mpsc::Sender<Message>,
    buffer: Vec<u8>,
    hasher: Hasher,
    spare: Spare,
}

/// Part buffers given back once their part is sent, for the next parts: a fresh 16 MiB buffer
/// is fresh pages, each faulted in and zeroed by the kernel (about a twentieth of an upload's
/// CPU when every part had its own).
#[derive(Clone, Default)]
struct Spare(Arc<Mutex<Vec<Vec<u8>>>>);

impl Spare {
    /// Buffers kept: as many as can be out at once (module doc).
    const KEPT: usize = PARTS_IN_FLIGHT + 3;

    fn take(&self) -> Vec<u8> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner()).pop();
        kept.unwrap_or_else(|| Vec::with_capacity(PART_BYTES))
    }

    fn give_back(&self, mut buffer: Vec<u8>) {
        buffer.clear();
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() < Self::KEPT {
            kept.push(buffer);
        }
    }
}

/// A part's bytes, whose buffer goes back to the sink's [`Spare`] when the store is done
/// with them (every clone of the part, retries included, dropped).
struct Part {
    bytes: Vec<u8>,
    spare: Spare,
}

impl AsRef<[u8]> for Part {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Part {
    fn drop(&mut self) {
        self.spare.give_back(std::mem::take(&mut self.bytes));
    }
}

/// How a streamed upload ended.
#[derive(Debug)]
pub enum PutOutcome {
    /// Complete: the object is stored.
    Stored,
    /// The sink was dropped before it finished; the upload was aborted.
    Abandoned,
}

/// The task that drives a streamed multipart upload (module doc).
pub struct PutTask {
    task: JoinHandle<Result<PutOutcome, ObjectsError>>,
    /// Set by the task when the store failed, before the sink can see it fail.
    store_failed: Arc<AtomicBool>,
}

/// The sink and task of a multipart upload already created at the store.
pub(super) fn start(upload: Box<dyn MultipartUpload>, key: String) -> (PartSink, PutTask) {
    let (parts, received) = mpsc::channel(1);
    let store_failed = Arc::new(AtomicBool::new(false));
    let task = tokio::spawn(drive(upload, received, key, store_failed.clone()));
    let spare = Spare::default();
    let sink = PartSink {
        parts,
        buffer: spare.take(),
        hasher: Hasher::new(),
        spare,
    };
    (sink, PutTask { task, store_failed })
}

impl PartSink {
    /// Sends the last part and asks for the upload to be completed; returns the SHA-256 of
    /// everything written. Whether the object is stored is [`PutTask::outcome`]'s to say.
    pub fn finish(mut self) -> io::Result<Sha256Hex> {
        if !self.buffer.is_empty() {
            self.send_part()?;
        }
        self.parts
            .blocking_send(Message::End)
            .map_err(|_| store_failed())?;
        Ok(self.hasher.finish())
    }

    fn send_part(&mut self) -> io::Result<()> {
        let part = Part {
            bytes: std::mem::replace(&mut self.buffer, self.spare.take()),
            spare: self.spare.clone(),
        };
        self.parts
            .blocking_send(Message::Part(Bytes::from_owner(part)))
            .map_err(|_| store_failed())
    }
}

/// The sink's error once its task has ended early: the store failed (the task's outcome holds
/// the store's own error).
fn store_failed() -> io::Error {
    io::Error::other("the object store failed during the upload")
}

impl Write for PartSink {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.hasher.update(bytes);
        let mut rest = bytes;
        while !rest.is_empty() {
            let take = (PART_BYTES - self.buffer.len()).min(rest.len());
            self.buffer.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.buffer.len() == PART_BYTES {
                self.send_part()?;
            }
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl PutTask {
    /// Whether the store failed: known, without waiting for the abort, as soon as a write to
    /// the sink has failed because of it (so a failed parse can tell the store's failure from
    /// its own at once).
    pub fn store_failed(&self) -> bool {
        self.store_failed.load(Ordering::SeqCst)
    }

    /// Waits for the upload to end: stored, abandoned (aborted), or failed at the store
    /// (aborted as far as the store answers).
    pub async fn outcome(self) -> Result<PutOutcome, ObjectsError> {
        self.task
            .await
            .map_err(|e| ObjectsError::Io(io::Error::other(e.to_string())))?
    }
}

/// Puts each part received, at most [`PARTS_IN_FLIGHT`] at once; completes the upload on
/// [`Message::End`], aborts it when the sink goes away first or the store fails.
async fn drive(
    upload: Box<dyn MultipartUpload>,
    mut received: mpsc::Receiver<Message>,
    key: String,
    store_failed: Arc<AtomicBool>,
) -> Result<PutOutcome, ObjectsError> {
    let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
    let failure = loop {
        match received.recv().await {
            Some(Message::Part(part)) => match writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                Ok(()) => writer.put(part),
                Err(e) => break Some(e),
            },
            // Every part stored before the completion, so that a part's failure still aborts
            // (`finish` aborts only when the completion itself fails).
            Some(Message::End) => match writer.wait_for_capacity(0).await {
                Ok(()) => return Ok(writer.finish().await.map(|_| PutOutcome::Stored)?),
                Err(e) => break Some(e),
            },
            None => break None,
        }
    };
    // The sink learns of a failure at its next part, after the flag is set.
    if let Some(e) = &failure {
        tracing::warn!(key = %key, error = %e, "the object store failed during a streamed upload");
        store_failed.store(true, Ordering::SeqCst);
    }
    drop(received);
    if let Err(abort) = writer.abort().await {
        tracing::warn!(key = %key, error = %abort, "could not abort a multipart upload; the store's own clean-up removes its parts");
    }
    match failure {
        Some(e) => Err(e.into()),
        None => Ok(PutOutcome::Abandoned),
    }
}

#[cfg(test)]
#[path = "stream_put_tests.rs"]
mod tests;
