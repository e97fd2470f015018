use std::sync::Mutex;

use super::*;
use crate::linalg::testing::gaussian;
use crate::linalg::{Matrix, Residency};

/// What a walk did, in values from the start of the data: each segment released, and each
/// record copied, in order.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    Released(usize, usize),
    Copied(usize, usize),
}

struct Trace {
    base: usize,
    events: Mutex<Vec<Event>>,
}

impl Trace {
    fn new(values: &[f64]) -> Self {
        Trace {
            base: values.as_ptr() as usize,
            events: Mutex::new(Vec::new()),
        }
    }

    fn range(&self, part: &[f64]) -> (usize, usize) {
        let start = (part.as_ptr() as usize - self.base) / 8;
        (start, start + part.len())
    }

    fn copied(&self, record: &[f64]) {
        let (from, to) = self.range(record);
        self.events.lock().expect("trace").push(Event::Copied(from, to));
    }

    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.events.lock().expect("trace"))
    }
}

impl Residency for Trace {
    fn release(&self, part: &[f64]) {
        let (from, to) = self.range(part);
        self.events.lock().expect("trace").push(Event::Released(from, to));
    }
}

#[test]
fn the_chosen_records_are_copied_in_order() {
    let (d, n) = (3, 40);
    let xt = gaussian(d, n, 1);
    let indices = [0, 7, 8, 21, 39];
    for segment in [1, 4, 7, 40, 100] {
        let mut got = Vec::new();
        gather_walking_in_segments(Records::from(&xt), &indices, segment, |k, record| {
            got.push((k, record.to_vec()));
        });
        let want: Vec<_> = indices
            .iter()
            .enumerate()
            .map(|(k, &i)| (k, xt.column(i).iter().copied().collect::<Vec<_>>()))
            .collect();
        assert_eq!(got, want, "segment {segment}");
    }
}

#[test]
fn the_segments_walked_are_the_same_whichever_records_are_chosen() {
    let (d, n, segment) = (5, 103, 10);
    let xt = gaussian(d, n, 2);
    let trace = Trace::new(xt.as_slice());
    let records = Records::from(&xt).with_residency(&trace);
    let choices: [Vec<usize>; 4] = [
        vec![],
        (0..20).collect(),
        vec![3, 50, 51, 99, 102],
        (0..n).step_by(2).collect(),
    ];
    let mut walks = Vec::new();
    for indices in &choices {
        gather_walking_in_segments(records, indices, segment, |_, record| trace.copied(record));
        let events = trace.take();
        // Every copy lies within the segment released next: read while its segment is walked.
        let mut pending = Vec::new();
        for event in &events {
            match *event {
                Event::Copied(from, to) => pending.push((from, to)),
                Event::Released(start, end) => {
                    for (from, to) in pending.drain(..) {
                        assert!(
                            start <= from && to <= end,
                            "copy {from}..{to} outside {start}..{end}"
                        );
                    }
                }
            }
        }
        assert!(pending.is_empty(), "a copy after the last segment");
        let copies = events.iter().filter(|e| matches!(e, Event::Copied(..))).count();
        assert_eq!(copies, indices.len());
        let released: Vec<_> = events
            .into_iter()
            .filter(|e| matches!(e, Event::Released(..)))
            .collect();
        walks.push(released);
    }
    // Front to back over every value, in segments of n and d only.
    let want: Vec<_> = (0..n)
        .step_by(segment)
        .map(|start| Event::Released(start * d, (start + segment).min(n) * d))
        .collect();
    for walk in walks {
        assert_eq!(walk, want);
    }
}

#[test]
fn no_records_and_no_features_are_walked_without_copies_or_with_empty_ones() {
    let empty = Matrix::zeros(4, 0);
    gather_walking(Records::from(&empty), &[], |_, _| panic!("nothing to copy"));
    let featureless = Matrix::zeros(0, 6);
    let mut copied = 0;
    gather_walking(Records::from(&featureless), &[1, 5], |_, record| {
        assert!(record.is_empty());
        copied += 1;
    });
    assert_eq!(copied, 2);
}

#[test]
#[should_panic(expected = "ascending")]
fn indices_out_of_order_are_a_bug() {
    let xt = gaussian(2, 5, 3);
    gather_walking(Records::from(&xt), &[3, 1], |_, _| {});
}
