//! A records upload's statistics ([`RecordStats`]: XᵀX, Xᵀ1, n) and the norms of its records,
//! built while it streams, so that its first job finds them kept and never passes over the
//! stored file (issue 21 §2): a clipped job's quantile search reads the norms, and the clipped
//! statistics follow from the kept ones (`linalg::clip_tail`).
//!
//! The clipped rows, exactly as they are written to the file, are copied into blocks of
//! [`stats_block_len`] records; each full block goes over a rendezvous channel to one worker
//! thread, which adds it to a [`StatsAccumulator`] (a symmetric rank-k update on the
//! pool less the core the parse keeps busy)
//! while the parser fills the next block. So the Gram work overlaps the parse and the writes,
//! the data is read once, and at most two blocks (2 × `linalg::stream::SEGMENT_BYTES`) are
//! held beside the O(d) of the parse. The blocks are those of one pass over the stored file, so
//! the result is bit-identical to [`RecordStats::of`] on it. The norms are computed by the
//! parser's thread as each row is pushed, by the function [`Records::norms`] uses on the stored
//! values, so they are bit-identical to those too.
//!
//! The statistics are as sensitive as the data. They are only returned to the upload, which
//! keeps them beside the data once it is attached; an upload that fails drops them (the worker
//! ends when its channel closes) and nothing is written.

use std::mem;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::thread::{self, JoinHandle};

use crate::linalg::clip::l2_norm;
use crate::linalg::{RecordStats, Records, StatsAccumulator, stats_block_len};

/// The running worker: where full blocks go, where emptied ones come back, and its handle.
struct Worker {
    block_values: usize,
    blocks: SyncSender<Vec<f64>>,
    spare: Receiver<Vec<f64>>,
    handle: Option<JoinHandle<RecordStats>>,
}

/// What an upload built while it streamed: the statistics and the norm of every record, in
/// record order.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamedStats {
    pub stats: RecordStats,
    pub norms: Vec<f64>,
}

/// Rows in, statistics out; the worker starts with the first row (which fixes d).
#[derive(Default)]
pub(super) struct StatsStream {
    worker: Option<Worker>,
    /// ‖x‖₂ of every row pushed.
    norms: Vec<f64>,
    /// The block being filled.
    current: Vec<f64>,
    /// The worker is gone (it panicked): no statistics, the upload goes on without them.
    broken: bool,
    /// Records per block when not [`stats_block_len`] (tests of the block boundaries).
    block_len: Option<usize>,
}

impl StatsStream {
    /// Adds one row (clipped, as written). All rows must have the same width (the sink checks).
    pub(super) fn push(&mut self, row: &[f64]) {
        if self.broken {
            return;
        }
        let block_len = self.block_len;
        let worker = self
            .worker
            .get_or_insert_with(|| Worker::start(row.len(), block_len));
        if self.current.capacity() == 0 {
            self.current.reserve_exact(worker.block_values);
        }
        self.norms.push(l2_norm(row));
        self.current.extend_from_slice(row);
        if self.current.len() >= worker.block_values {
            let next = match worker.spare.try_recv() {
                Ok(mut spare) => {
                    spare.clear();
                    spare
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => Vec::new(),
            };
            let full = mem::replace(&mut self.current, next);
            self.broken = worker.blocks.send(full).is_err();
        }
    }

    /// The statistics and norms of every row pushed (`None` when there were none, or the worker
    /// failed).
    pub(super) fn finish(mut self) -> Option<StreamedStats> {
        let worker = self.worker.take()?;
        if !self.broken && !self.current.is_empty() {
            self.broken = worker.blocks.send(mem::take(&mut self.current)).is_err();
        }
        drop(worker.blocks);
        let stats = worker.handle?.join().ok()?;
        (!self.broken).then_some(StreamedStats {
            stats,
            norms: self.norms,
        })
    }
}

impl Worker {
    fn start(d: usize, block_len: Option<usize>) -> Self {
        let block_values = block_len.unwrap_or_else(|| stats_block_len(d)).max(1) * d;
        let (blocks, incoming) = sync_channel::<Vec<f64>>(0);
        let (give_back, spare) = sync_channel::<Vec<f64>>(1);
        let handle = thread::Builder::new()
            .name("upload-stats".into())
            .spawn(move || {
                let mut acc = StatsAccumulator::beside_a_busy_thread(d);
                for block in incoming {
                    acc.add(Records::new(&block, d, block.len() / d));
                    let _ = give_back.try_send(block);
                }
                acc.finish()
            })
            .ok();
        // Without a thread (the system refused one), the channel is closed: the first full block
        // marks the stream broken and the upload goes on without statistics.
        Worker {
            block_values,
            blocks,
            spare,
            handle,
        }
    }
}

#[cfg(test)]
#[path = "stats_stream_tests.rs"]
mod tests;
