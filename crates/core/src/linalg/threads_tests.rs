use super::*;

#[test]
fn init_threads_is_idempotent_and_par_follows_the_pool() {
    init_threads(2);
    let first = rayon::current_num_threads();
    init_threads(7);
    assert_eq!(rayon::current_num_threads(), first);
    match par() {
        Par::Seq => assert_eq!(first, 1),
        Par::Rayon(n) => assert_eq!(n.get(), first),
    }
}

#[test]
fn small_work_runs_sequentially() {
    assert_eq!(par_for(0), Par::Seq);
    assert_eq!(par_for(PRODUCT_MIN_WORK - 1), Par::Seq);
    assert_eq!(par_for(PRODUCT_MIN_WORK), par());
    assert_eq!(par_for_decomposition(DECOMPOSITION_MIN_WORK - 1), Par::Seq);
    assert_eq!(par_for_decomposition(DECOMPOSITION_MIN_WORK), par());
    assert_eq!(par_for_svd(SVD_MIN_WORK - 1), Par::Seq);
    assert_eq!(par_for_svd(SVD_MIN_WORK), par());
    assert_eq!(work(usize::MAX, 2, 3), usize::MAX);
}
