use super::*;

const RO: Neighbours = Neighbours::ReplaceOne {
    beta: 2.0,
    alpha: 8.0,
};
const AR: Neighbours = Neighbours::AddRemove {
    beta: 2.0,
    alpha: 8.0,
};

#[test]
fn the_shares_sum_to_at_most_the_charge() {
    for charged in [0.002, 0.01, 0.1, 1.0, 0.3, 7.77e-5] {
        let clip = CapeClip::configure(ClipAsk::Auto, charged, &RO, 20).unwrap();
        let (step, rest) = clip.shares(charged);
        assert!(8.0 * step + rest <= charged, "{charged}");
        assert!((8.0 * step - 0.1 * charged).abs() <= 1e-15 * charged);
        assert!(rest > 0.89 * charged);
    }
}

#[test]
fn the_gram_sensitivity_scales_as_c_squared() {
    let delta = crate::algorithms::analyze_gauss::sensitivity(&RO);
    let at = gram_sensitivity_at(delta, 2.0, 0.5);
    let direct = crate::algorithms::analyze_gauss::sensitivity(&Neighbours::ReplaceOne {
        beta: 0.5,
        alpha: 2.0,
    });
    assert!((at - direct).abs() <= 1e-15 * direct);
}

#[test]
fn a_clip_that_does_not_fit_its_study_is_refused() {
    let clip = CapeClip::configure(ClipAsk::Auto, 0.01, &RO, 20).unwrap();
    assert!(clip.auto_quantile);
    assert!(clip.check(&RO, 20).is_ok());
    assert!(clip.check(&RO, 21).is_err());
    assert!(
        clip.check(
            &Neighbours::ReplaceOne {
                beta: 1.0,
                alpha: 8.0
            },
            20
        )
        .is_err()
    );
    // An auto quantile under add_remove, where Δ depends on q.
    assert!(clip.check(&AR, 20).is_err());
    let fixed = CapeClip::configure(ClipAsk::Auto, 0.01, &AR, 20).unwrap();
    assert!(!fixed.auto_quantile && fixed.check(&AR, 20).is_ok());
    assert_eq!(count_sensitivity(&AR, 0.8), 0.8);
    assert_eq!(count_sensitivity(&RO, 0.8), 1.0);
}
