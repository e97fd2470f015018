use super::*;

fn held(rows: &[&[f64]]) -> SymmetricRows {
    let mut s = SymmetricRows::default();
    rows.iter().for_each(|r| s.push(r));
    s
}

#[test]
fn near_symmetric_entries_become_their_mean() {
    let mut s = held(&[&[1.0, 2.0 + 1e-12], &[2.0 - 1e-12, 3.0]]);
    assert_eq!(s.symmetrise(), Ok(()));
    assert_eq!(s.rows[0][1], s.rows[1][0]);
    assert!((s.rows[0][1] - 2.0).abs() < 1e-15);
    assert_eq!((s.rows[0][0], s.rows[1][1]), (1.0, 3.0));
}

#[test]
fn the_tolerance_is_relative_to_the_largest_entry() {
    // 1e6 scale: a difference of 1e-4 is 1e-10 relative, within tolerance.
    assert_eq!(held(&[&[1e6, 5.0], &[5.0 + 1e-4, 0.0]]).symmetrise(), Ok(()));
    // Unit scale: a difference of 1e-6 is far beyond 1e-9.
    assert_eq!(held(&[&[1.0, 5.0], &[5.0 + 1e-6, 0.0]]).symmetrise(), Err((0, 1)));
}

#[test]
fn violations_beyond_a_tile_are_found() {
    let m = 150;
    let mut rows = vec![vec![0.0; m]; m];
    rows[140][70] = 1.0;
    let refs: Vec<&[f64]> = rows.iter().map(Vec::as_slice).collect();
    assert_eq!(held(&refs).symmetrise(), Err((70, 140)));
}

#[test]
fn huge_opposite_entries_are_not_symmetric_and_huge_equal_ones_are() {
    let max = f64::MAX;
    assert_eq!(held(&[&[0.0, max], &[-max, 0.0]]).symmetrise(), Err((0, 1)));
    let mut s = held(&[&[0.0, max], &[max, 0.0]]);
    assert_eq!(s.symmetrise(), Ok(()));
    assert_eq!(s.rows[0][1], max);
}

#[test]
fn only_the_first_m_rows_are_held() {
    let s = held(&[&[1.0, 0.0], &[0.0, 1.0], &[9.0, 9.0]]);
    assert_eq!(s.rows.len(), 2);
    let mut out = Vec::new();
    s.write_to(&mut out).expect("vec write");
    assert_eq!(out.len(), 4 * 8);
    assert_eq!(out[..8], 1.0f64.to_le_bytes());
}
