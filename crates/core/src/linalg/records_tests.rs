use super::*;
use std::sync::Mutex;

#[test]
fn records_view_the_slice_as_xt() {
    // X = [[1, 2, 3], [4, 5, 6]]: two records of three features.
    let values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let xt = Records::new(&values, 3, 2);
    assert_eq!((xt.d(), xt.n()), (3, 2));
    assert_eq!(xt.column(1).as_slice(), &[4.0, 5.0, 6.0]);
    assert_eq!(xt[(2, 0)], 3.0);
    assert_eq!(xt.to_matrix(), Matrix::from_column_slice(3, 2, &values));
    let second = xt.block(1, 1);
    assert_eq!(second.as_slice(), &[4.0, 5.0, 6.0]);
    assert_eq!(second.faer()[(1, 0)], 5.0);
}

#[test]
fn a_matrix_is_records_without_a_copy() {
    let m = Matrix::from_fn(4, 3, |i, j| (i * 10 + j) as f64);
    let xt = Records::from(&m);
    assert_eq!(xt.as_slice().as_ptr(), m.as_slice().as_ptr());
    assert_eq!(
        *xt,
        m.as_view::<nalgebra::Dyn, nalgebra::Dyn, nalgebra::U1, nalgebra::Dyn>()
    );
}

#[derive(Default)]
struct Log(Mutex<Vec<(usize, usize)>>);

impl Residency for Log {
    fn release(&self, part: &[f64]) {
        self.0
            .lock()
            .expect("log")
            .push((part.as_ptr() as usize, part.len()));
    }
}

#[test]
fn blocks_carry_the_residency_hook() {
    let values: Vec<f64> = (0..12).map(f64::from).collect();
    let log = Log::default();
    let xt = Records::new(&values, 2, 6).with_residency(&log);
    xt.block(2, 3).release();
    Records::new(&values, 2, 6).release();
    let got = log.0.lock().expect("log").clone();
    assert_eq!(got, vec![(values[4..].as_ptr() as usize, 6)]);
}

#[test]
#[should_panic(expected = "does not match")]
fn a_wrong_shape_is_a_bug() {
    let _ = Records::new(&[1.0, 2.0, 3.0], 2, 2);
}

#[test]
fn norms_are_computed_once_into_an_attached_cell_and_blocks_do_not_share_it() {
    let m = Matrix::from_fn(3, 5, |i, j| (i as f64 + 1.0) * (j as f64 - 2.0));
    let want: Vec<f64> = m
        .column_iter()
        .map(|c| super::super::clip::l2_norm(c.as_slice()))
        .collect();
    let plain = Records::from(&m);
    assert_eq!(plain.norms().as_ref(), want.as_slice());
    let cell = std::sync::OnceLock::new();
    let kept = Records::from(&m).with_norms(&cell);
    assert!(cell.get().is_none(), "computed on first use only");
    assert_eq!(kept.norms().as_ref(), want.as_slice());
    assert_eq!(cell.get().map(Vec::as_slice), Some(want.as_slice()));
    // A block is other records: it computes its own.
    assert_eq!(kept.block(1, 2).norms().as_ref(), &want[1..3]);
}
