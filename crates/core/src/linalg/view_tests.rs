use super::*;

#[test]
fn views_share_storage_and_indexing() {
    let mut m = Matrix::from_fn(3, 2, |i, j| (10 * i + j) as f64);
    let v = view(&m);
    assert_eq!((v.nrows(), v.ncols()), (3, 2));
    assert_eq!(v.as_ptr(), m.as_slice().as_ptr());
    for i in 0..3 {
        for j in 0..2 {
            assert_eq!(v[(i, j)], m[(i, j)]);
        }
    }
    view_mut(&mut m)[(2, 1)] = -1.0;
    assert_eq!(m[(2, 1)], -1.0);
}

#[test]
fn empty_matrices_have_views() {
    let m = Matrix::zeros(0, 4);
    assert_eq!(view(&m).shape(), (0, 4));
    let mut m = Matrix::zeros(5, 0);
    assert_eq!(view_mut(&mut m).shape(), (5, 0));
}
