use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::*;

fn secret(byte: u8) -> Seed {
    std::array::from_fn(|i| byte.wrapping_mul(31).wrapping_add(i as u8))
}

#[test]
fn shares_have_x_one_to_count_in_order() {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let shares = split(&secret(1), 3, 255, &mut rng).expect("split");
    let xs: Vec<u8> = shares.iter().map(|s| s.x).collect();
    assert_eq!(xs, (1..=255).collect::<Vec<u8>>());
}

#[test]
fn any_threshold_subset_recovers_the_secret() {
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let s = secret(2);
    let shares = split(&s, 3, 5, &mut rng).expect("split");
    for subset in [[0, 1, 2], [2, 3, 4], [4, 0, 2], [1, 3, 4]] {
        let picked: Vec<Share> = subset.iter().map(|&i| shares[i].clone()).collect();
        assert_eq!(combine(&picked, 3).expect("3 shares"), s, "{subset:?}");
    }
    assert_eq!(combine(&shares, 3).expect("all shares"), s);
}

#[test]
fn too_few_or_duplicate_shares_fail() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let shares = split(&secret(3), 3, 5, &mut rng).expect("split");
    let two = [shares[0].clone(), shares[1].clone()];
    assert_eq!(
        combine(&two, 3),
        Err(ShamirError::TooFewShares {
            distinct: 2,
            threshold: 3
        })
    );
    let repeated = [shares[0].clone(), shares[1].clone(), shares[1].clone()];
    assert!(matches!(
        combine(&repeated, 3),
        Err(ShamirError::TooFewShares { distinct: 2, .. })
    ));
    let mut forged = shares[1].clone();
    forged.y[0] ^= 1;
    let conflicting = [shares[0].clone(), shares[1].clone(), forged, shares[2].clone()];
    assert_eq!(combine(&conflicting, 3), Err(ShamirError::Conflicting { x: 2 }));
}

#[test]
fn fewer_than_threshold_shares_reveal_nothing_fixed() {
    // Two shares of a 3-of-n sharing are uniform: the same x gives different y for the
    // same secret under different randomness, and a wrong third share recovers garbage.
    let s = secret(4);
    let a = split(&s, 3, 3, &mut ChaCha20Rng::seed_from_u64(4)).expect("split");
    let b = split(&s, 3, 3, &mut ChaCha20Rng::seed_from_u64(5)).expect("split");
    assert_ne!(a[0].y, b[0].y);
    let mixed = [a[0].clone(), a[1].clone(), b[2].clone()];
    assert_ne!(combine(&mixed, 3).expect("3 shares"), s);
}

#[test]
fn bad_parameters_are_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    assert!(matches!(
        split(&secret(5), 1, 5, &mut rng),
        Err(ShamirError::Threshold { .. })
    ));
    assert!(matches!(
        split(&secret(5), 6, 5, &mut rng),
        Err(ShamirError::Threshold { .. })
    ));
    let shares = split(&secret(5), 2, 2, &mut rng).expect("2 of 2");
    assert!(matches!(combine(&shares, 1), Err(ShamirError::Threshold { .. })));
    let zero = Share { x: 0, y: [0; 32] };
    assert_eq!(combine(&[zero, shares[0].clone()], 2), Err(ShamirError::ZeroX));
}

#[test]
fn bytes_round_trip_and_validation() {
    let share = Share { x: 7, y: [9; 32] };
    let bytes = share.to_bytes();
    assert_eq!(bytes[0], 7);
    assert_eq!(Share::from_bytes(&bytes).expect("33 bytes"), share);
    assert_eq!(
        Share::from_bytes(&bytes[..32]),
        Err(ShamirError::Length { got: 32 })
    );
    let mut zero = bytes;
    zero[0] = 0;
    assert_eq!(Share::from_bytes(&zero), Err(ShamirError::ZeroX));
    assert!(!format!("{share:?}").contains('9'), "Debug hides y");
}
