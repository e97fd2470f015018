//! An upload's file, pushed to disk while it is written: every [`SYNC_EVERY`] bytes a helper
//! thread calls `fdatasync` on a second handle to it, so the sync that makes the upload durable
//! before it is acknowledged waits only for the pages written since the last one. A 400 MB
//! upload's single sync at the end took 0.21 s on the development machine (issue 21 §2,
//! docs/performance-service.md).
//!
//! Durability is decided by [`SyncedFile::finish`] alone: it waits for the helper, fails if any
//! of the helper's syncs failed, then syncs the whole file. (On Linux a write-back error is
//! reported to every handle open on the file when it happened, so it reaches `finish` either
//! way; the helper's own error is checked too, so the upload never relies on that.)

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::{self, JoinHandle};

/// Bytes written between two requests for a background sync.
pub const SYNC_EVERY: u64 = 32 << 20;

/// A file being written front to back, synced as it goes (module doc).
pub struct SyncedFile {
    file: File,
    since_sync: u64,
    requests: Option<SyncSender<()>>,
    helper: Option<JoinHandle<io::Result<()>>>,
    /// Whether [`SyncedFile::finish`] syncs (not for [`SyncedFile::unsynced`]).
    sync: bool,
}

impl SyncedFile {
    /// Creates (or truncates) the file at `path`. Without a helper thread (the system refused
    /// one, or the handle could not be cloned) it is an ordinary file synced once at the end.
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = File::create(path)?;
        let (requests, helper) = match file.try_clone() {
            Ok(second) => {
                // Capacity 1: requests made while a sync runs collapse into one more.
                let (tx, rx) = sync_channel::<()>(1);
                let helper = thread::Builder::new()
                    .name("upload-sync".into())
                    .spawn(move || -> io::Result<()> {
                        for () in rx {
                            second.sync_data()?;
                        }
                        Ok(())
                    })
                    .ok();
                (helper.is_some().then_some(tx), helper)
            }
            Err(_) => (None, None),
        };
        Ok(SyncedFile {
            file,
            since_sync: 0,
            requests,
            helper,
            sync: true,
        })
    }

    /// Creates (or truncates) a file that is never synced: a copy whose durable home is
    /// elsewhere (an upload's data in the object store; the local file is a cache copy,
    /// checked against the stored checksum before it is used).
    pub fn unsynced(path: &Path) -> io::Result<Self> {
        Ok(SyncedFile {
            file: File::create(path)?,
            since_sync: 0,
            requests: None,
            helper: None,
            sync: false,
        })
    }

    /// Waits for the background syncs and syncs the whole file: `Ok` only when every sync
    /// succeeded, and then all written data is on disk.
    pub fn finish(mut self) -> io::Result<File> {
        drop(self.requests.take());
        if let Some(helper) = self.helper.take() {
            helper
                .join()
                .map_err(|_| io::Error::other("the upload's sync thread panicked"))??;
        }
        if self.sync {
            self.file.sync_all()?;
        }
        Ok(self.file)
    }
}

impl Write for SyncedFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.file.write(buf)?;
        self.since_sync += written as u64;
        if self.since_sync >= SYNC_EVERY {
            self.since_sync = 0;
            if let Some(requests) = &self.requests {
                // Full: a sync is already asked for; gone: the helper stopped on an error,
                // which `finish` reports.
                let _ = requests.try_send(());
            }
        }
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
#[path = "synced_file_tests.rs"]
mod tests;
