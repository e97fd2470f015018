use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sha2::Digest as _;

use super::gf65536::{self, TABLES};
use super::packed::Block;
use super::*;

fn secret(byte: u8) -> Seed {
    std::array::from_fn(|i| byte.wrapping_mul(31).wrapping_add(i as u8))
}

fn random_secret(rng: &mut ChaCha20Rng) -> Seed {
    let mut s = [0u8; 32];
    rng.fill_bytes(&mut s);
    s
}

/// a·b in GF(2¹⁶) by schoolbook carry-less multiplication and reduction (independent of the
/// module's shift-and-add and its tables).
fn reference_mul(a: u16, b: u16) -> u16 {
    schoolbook_mul(u32::from(a), u32::from(b), 16, gf65536::REDUCTION as u32) as u16
}

/// a·b in GF(2^`bits`) modulo X^`bits` + `reduction`: carry-less product, then reduction.
fn schoolbook_mul(a: u32, b: u32, bits: u32, reduction: u32) -> u32 {
    let mut product: u32 = 0;
    for bit in 0..bits {
        if (b >> bit) & 1 == 1 {
            product ^= a << bit;
        }
    }
    for bit in (bits..2 * bits).rev() {
        if (product >> bit) & 1 == 1 {
            product ^= ((1 << bits) | reduction) << (bit - bits);
        }
    }
    product
}

fn reference_inverse(a: u16) -> u16 {
    // a^(2¹⁶ − 2) by square and multiply.
    let (mut result, mut base, mut e) = (1u16, a, 65_534u32);
    while e > 0 {
        if e & 1 == 1 {
            result = reference_mul(result, base);
        }
        base = reference_mul(base, base);
        e >>= 1;
    }
    result
}

/// The 16 lanes of a block as field elements.
fn lanes(block: &Block) -> Vec<u16> {
    block
        .iter()
        .flat_map(|w| (0..4).map(move |j| (w >> (16 * j)) as u16))
        .collect()
}

#[test]
fn x_generates_every_nonzero_element_so_the_polynomial_is_primitive() {
    // If X¹⁶ + X¹² + X³ + X + 1 were reducible the unit group would have fewer than 65 535
    // elements and no element could have order 65 535.
    let mut seen = vec![false; 1 << 16];
    for &v in &TABLES.exp[..65_535] {
        assert!(
            v != 0 && !seen[usize::from(v)],
            "X has order below 65535 (repeat at {v})"
        );
        seen[usize::from(v)] = true;
    }
    assert_eq!(TABLES.exp[65_535], 1);
    for v in 1..=u16::MAX {
        assert_eq!(TABLES.exp[usize::from(TABLES.log[usize::from(v)])], v);
    }
}

#[test]
fn packed_multiplication_matches_the_reference() {
    let mut rng = ChaCha20Rng::seed_from_u64(10);
    for c in [0u16, 1, 2, 3, 0x8000, 0xFFFF, 255, 256, 1000] {
        let b: Block = std::array::from_fn(|_| rng.next_u64());
        let got = lanes(&gf65536::mul_public(&b, c));
        let want: Vec<u16> = lanes(&b).iter().map(|&a| reference_mul(a, c)).collect();
        assert_eq!(got, want, "c = {c}");
    }
    for _ in 0..2000 {
        let c = rng.next_u32() as u16;
        let b: Block = std::array::from_fn(|_| rng.next_u64());
        let want: Vec<u16> = lanes(&b).iter().map(|&a| reference_mul(a, c)).collect();
        assert_eq!(lanes(&gf65536::mul_public(&b, c)), want, "c = {c}");
    }
}

#[test]
fn lagrange_coefficients_match_the_reference() {
    let xs = [1u16, 2, 300, 65_535, 4097];
    let lambdas = TABLES.lagrange_at_zero(&xs);
    for (i, &xi) in xs.iter().enumerate() {
        let mut want = 1u16;
        for &xj in xs.iter().filter(|&&xj| xj != xi) {
            want = reference_mul(want, reference_mul(xj, reference_inverse(xi ^ xj)));
        }
        assert_eq!(lambdas[i], want, "x = {xi}");
    }
}

#[test]
fn the_field_is_the_smallest_that_holds_count() {
    assert_eq!(Field::for_count(0), None);
    assert_eq!(Field::for_count(1), Some(Field::Gf256));
    assert_eq!(Field::for_count(255), Some(Field::Gf256));
    assert_eq!(Field::for_count(256), Some(Field::Gf65536));
    assert_eq!(Field::for_count(65_535), Some(Field::Gf65536));
    assert_eq!(Field::for_count(65_536), None);
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let narrow = split(&secret(1), 2, 255, &mut rng).expect("split");
    assert!(
        narrow
            .iter()
            .all(|s| s.field() == Field::Gf256 && s.to_bytes().len() == 33)
    );
    let wide = split(&secret(1), 2, 256, &mut rng).expect("split");
    assert!(
        wide.iter()
            .all(|s| s.field() == Field::Gf65536 && s.to_bytes().len() == 34)
    );
}

#[test]
fn shares_have_x_one_to_count_in_order() {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    for count in [255u16, 1000] {
        let shares = split(&secret(1), 3, count, &mut rng).expect("split");
        let xs: Vec<u16> = shares.iter().map(Share::x).collect();
        assert_eq!(xs, (1..=count).collect::<Vec<u16>>());
    }
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
fn a_thousand_shares_recover_at_the_threshold_in_any_order_and_not_below() {
    // The complete graph at S = 1000: t = ⌈2S/3⌉ = 667 of x = 1..=1000.
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let s = random_secret(&mut rng);
    let mut shares = split(&s, 667, 1000, &mut rng).expect("split");
    for _ in 0..3 {
        shares.shuffle(&mut rng);
        assert_eq!(combine(&shares[..667], 667).expect("667 shares"), s);
    }
    assert_eq!(
        combine(&shares[..666], 667),
        Err(ShamirError::TooFewShares {
            distinct: 666,
            threshold: 667
        })
    );
    // 666 shares and any wrong 667th point give a different secret.
    let mut wrong = shares[666].clone();
    wrong.y[5] ^= 0x40;
    let mut forged = shares[..666].to_vec();
    forged.push(wrong);
    assert_ne!(combine(&forged, 667).expect("667 shares"), s);
}

#[test]
fn all_zero_and_all_ff_secrets_round_trip_in_both_fields() {
    let mut rng = ChaCha20Rng::seed_from_u64(13);
    for s in [[0u8; 32], [0xFF; 32]] {
        for (t, count) in [(3u16, 5u16), (200, 300)] {
            let mut shares = split(&s, t, count, &mut rng).expect("split");
            // Shares of a constant secret still look random: not all equal to the secret.
            assert!(shares.iter().any(|sh| sh.y != s), "t = {t}");
            shares.shuffle(&mut rng);
            assert_eq!(combine(&shares[..usize::from(t)], t).expect("t shares"), s);
        }
    }
}

#[test]
fn fewer_than_threshold_shares_reveal_nothing_fixed() {
    // Two shares of a 3-of-n sharing are uniform: the same x gives different y for the
    // same secret under different randomness, and a wrong third share recovers garbage.
    for count in [3u16, 300] {
        let s = secret(4);
        let a = split(&s, 3, count, &mut ChaCha20Rng::seed_from_u64(4)).expect("split");
        let b = split(&s, 3, count, &mut ChaCha20Rng::seed_from_u64(5)).expect("split");
        assert_ne!(a[0].y, b[0].y);
        let mixed = [a[0].clone(), a[1].clone(), b[2].clone()];
        assert_ne!(combine(&mixed, 3).expect("3 shares"), s);
    }
}

#[test]
fn too_few_or_duplicate_shares_fail() {
    for count in [5u16, 260] {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let shares = split(&secret(3), 3, count, &mut rng).expect("split");
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
}

#[test]
fn shares_of_two_fields_do_not_combine() {
    let mut rng = ChaCha20Rng::seed_from_u64(15);
    let narrow = split(&secret(6), 2, 5, &mut rng).expect("split");
    let wide = split(&secret(6), 2, 300, &mut rng).expect("split");
    assert_eq!(
        combine(&[narrow[0].clone(), wide[1].clone()], 2),
        Err(ShamirError::MixedFields)
    );
    assert_eq!(
        combine(&[wide[0].clone(), narrow[1].clone()], 2),
        Err(ShamirError::MixedFields)
    );
}

#[test]
fn bad_parameters_are_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    for (t, count) in [(1u16, 5u16), (6, 5), (0, 0), (2, 0), (1, 300)] {
        assert!(
            matches!(
                split(&secret(5), t, count, &mut rng),
                Err(ShamirError::Threshold { .. })
            ),
            "({t}, {count})"
        );
    }
    let shares = split(&secret(5), 2, 2, &mut rng).expect("2 of 2");
    assert!(matches!(combine(&shares, 1), Err(ShamirError::Threshold { .. })));
    let zero = Share {
        field: Field::Gf256,
        x: 0,
        y: [0; 32],
    };
    assert_eq!(combine(&[zero, shares[0].clone()], 2), Err(ShamirError::ZeroX));
}

#[test]
fn bytes_round_trip_and_validation() {
    let share = Share {
        field: Field::Gf256,
        x: 7,
        y: [9; 32],
    };
    let bytes = share.to_bytes();
    assert_eq!(bytes[0], 7);
    assert_eq!(Share::from_bytes(&bytes).expect("33 bytes"), share);
    assert_eq!(
        Share::from_bytes(&bytes[..32]),
        Err(ShamirError::Length { got: 32 })
    );
    let mut zero = bytes.to_vec();
    zero[0] = 0;
    assert_eq!(Share::from_bytes(&zero), Err(ShamirError::ZeroX));
    assert!(!format!("{share:?}").contains('9'), "Debug hides y");

    let wide = Share {
        field: Field::Gf65536,
        x: 0x0102,
        y: [7; 32],
    };
    let bytes = wide.to_bytes();
    assert_eq!(bytes[..2], [1, 2]);
    assert_eq!(Share::from_bytes(&bytes).expect("34 bytes"), wide);
    assert_eq!(Share::from_bytes(&[0u8; 34]), Err(ShamirError::ZeroX));
    assert_eq!(
        Share::from_bytes(&[1u8; 35]),
        Err(ShamirError::Length { got: 35 })
    );
    // A 34-byte share with a small x is a GF(2¹⁶) share, not a GF(2⁸) one.
    let mut small = [3u8; 34];
    small[0] = 0;
    let parsed = Share::from_bytes(&small).expect("34 bytes");
    assert_eq!((parsed.field(), parsed.x()), (Field::Gf65536, 3));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn any_threshold_subset_recovers_and_one_fewer_does_not(
        seed in any::<u64>(),
        count in prop_oneof![2u16..=255, 256u16..=700],
        t_fraction in 0.0f64..1.0,
    ) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let t = (2 + (t_fraction * f64::from(count - 2)) as u16).min(count);
        let s = random_secret(&mut rng);
        let mut shares = split(&s, t, count, &mut rng).expect("split");
        let distinct: std::collections::BTreeSet<u16> = shares.iter().map(Share::x).collect();
        prop_assert_eq!(distinct.len(), usize::from(count));
        prop_assert!(!distinct.contains(&0));
        shares.shuffle(&mut rng);
        prop_assert_eq!(combine(&shares[..usize::from(t)], t).expect("t shares"), s);
        let below = combine(&shares[..usize::from(t) - 1], t);
        let too_few = matches!(below, Err(ShamirError::TooFewShares { .. }));
        prop_assert!(too_few);
    }
}

/// `blahaj`'s own recovery, the reference for [`gf256`]: exactly the given distinct shares.
fn blahaj_recover(shares: &[Share]) -> Seed {
    let points: Vec<blahaj::Share> = shares
        .iter()
        .map(|s| blahaj::Share::try_from(&s.to_bytes()[..]).expect("a GF(2⁸) share"))
        .collect();
    let threshold = u8::try_from(shares.len()).expect("at most 255");
    let secret = blahaj::Sharks(threshold).recover(&points).expect("recovers");
    secret.try_into().expect("32 bytes")
}

/// a·b in GF(2⁸) mod X⁸ + X⁴ + X³ + X² + 1 by schoolbook carry-less multiplication.
fn reference_mul_gf256(a: u8, b: u8) -> u8 {
    schoolbook_mul(u32::from(a), u32::from(b), 8, super::gf256::REDUCTION as u32) as u8
}

#[test]
fn gf256_tables_and_packed_multiplication_match_the_reference() {
    let tables = &*super::gf256::TABLES;
    let mut seen = [false; 256];
    for &v in &tables.exp[..255] {
        assert!(
            v != 0 && v < 256 && !seen[usize::from(v)],
            "X has order below 255"
        );
        seen[usize::from(v)] = true;
    }
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    for c in 0..=255u16 {
        let b: Block = std::array::from_fn(|_| rng.next_u64());
        let got = super::packed::mul_public_by(&b, c, super::gf256::times_x);
        let bytes = |block: &Block| -> Vec<u8> { block.iter().flat_map(|w| w.to_le_bytes()).collect() };
        let want: Vec<u8> = bytes(&b)
            .iter()
            .map(|&a| reference_mul_gf256(a, c as u8))
            .collect();
        assert_eq!(bytes(&got), want, "c = {c}");
    }
}

#[test]
fn gf256_recovery_equals_blahaj_on_any_points() {
    // Dealt shares: the secret. Arbitrary points (no secret behind them): the same value at 0
    // as blahaj's interpolation, for thresholds 2..=255 and shuffled x.
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    for threshold in [2u16, 3, 7, 22, 67, 128, 255] {
        let s = random_secret(&mut rng);
        let mut shares = split(&s, threshold, 255, &mut rng).expect("split");
        shares.shuffle(&mut rng);
        let chosen = &shares[..usize::from(threshold)];
        assert_eq!(combine(chosen, threshold).expect("combine"), s, "t = {threshold}");
        assert_eq!(blahaj_recover(chosen), s);
        let arbitrary: Vec<Share> = chosen
            .iter()
            .map(|share| {
                let mut y = [0u8; 32];
                rng.fill_bytes(&mut y);
                Share {
                    field: Field::Gf256,
                    x: share.x,
                    y,
                }
            })
            .collect();
        assert_eq!(
            combine(&arbitrary, threshold).expect("combine"),
            blahaj_recover(&arbitrary),
            "t = {threshold}"
        );
    }
}

/// `blahaj` 0.7's dealing, which dealt GF(2⁸) shares before ours: the caller's RNG seeds a
/// `chacha20` 0.10 generator exactly as [`split`] does, and `blahaj` draws from it.
fn blahaj_split(secret: &Seed, threshold: u16, count: u16, rng: &mut ChaCha20Rng) -> Vec<Vec<u8>> {
    use chacha20_rng::rand_core::SeedableRng as _;
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut seed);
    let mut dealer = chacha20_rng::ChaCha20Rng::from_seed(seed);
    let threshold = u8::try_from(threshold).expect("at most 255");
    blahaj::Sharks(threshold)
        .dealer_rng(secret, &mut dealer)
        .take(usize::from(count))
        .map(|share| Vec::from(&share))
        .collect()
}

#[test]
fn gf256_dealing_equals_blahaj_byte_for_byte() {
    // A site that restarts deals its boxes again and compares them with those in its ledger, bit
    // for bit; boxes dealt by blahaj before must come out the same.
    let mut cases = vec![(2u16, 2u16), (2, 255), (255, 255), (3, 5), (64, 64)];
    let mut rng = ChaCha20Rng::seed_from_u64(36);
    for _ in 0..300 {
        let count = 2 + (rng.next_u32() % 254) as u16;
        let threshold = 2 + (rng.next_u32() % u32::from(count - 1)) as u16;
        cases.push((threshold, count));
    }
    for (case, (threshold, count)) in cases.into_iter().enumerate() {
        let s = random_secret(&mut rng);
        let caller_seed = rng.next_u64();
        let ours = split(&s, threshold, count, &mut ChaCha20Rng::seed_from_u64(caller_seed)).expect("split");
        let theirs = blahaj_split(&s, threshold, count, &mut ChaCha20Rng::seed_from_u64(caller_seed));
        assert_eq!(ours.len(), theirs.len());
        for (our, their) in ours.iter().zip(&theirs) {
            assert_eq!(
                &our.to_bytes()[..],
                &their[..],
                "case {case}: t = {threshold}, count = {count}, x = {}",
                our.x()
            );
        }
    }
}

#[test]
fn gf256_dealing_is_stable_across_dependency_updates() {
    // Pinned bytes (dealt by blahaj 0.7 with chacha20 0.10, equal to ours by the test above): a
    // new version of either generator that changed the stream would change dealt boxes.
    let shares = split(&secret(36), 3, 4, &mut ChaCha20Rng::seed_from_u64(36)).expect("split");
    let digest = sha2::Sha256::digest(
        shares
            .iter()
            .flat_map(|share| share.to_bytes().to_vec())
            .collect::<Vec<u8>>(),
    );
    assert_eq!(hex::encode(digest), GF256_PINNED_DEALING);
}

const GF256_PINNED_DEALING: &str = "899b2c1ce90161b9bdeb8c2a28d57db20b189c660c31e22c7837f1ff46cf6d69";

/// The value at 0 of the polynomial of degree ≤ k − 1 through k shares: what k = t − 1 shares
/// would say the secret is, were the dealer's polynomial of degree t − 2.
fn at_zero_through(shares: &[Share]) -> Seed {
    let points: Vec<(u16, &[u8; 32])> = shares.iter().map(|s| (s.x, &s.y)).collect();
    *match shares[0].field {
        Field::Gf256 => super::gf256::interpolate_at_zero(&points),
        Field::Gf65536 => gf65536::interpolate_at_zero(&points),
    }
}

#[test]
fn fewer_than_threshold_shares_are_consistent_with_every_secret() {
    // The t − 1 shares at x_1..x_{t−1} of f (degree t − 1, top coefficient c) are consistent with
    // the secret v exactly when the dealer could have drawn f + g, g of degree t − 1 vanishing on
    // the x_j with g(0) = v − f(0): g's top coefficient is (v − f(0)) / Π x_j, so every v is
    // possible when c is uniform over the field. Probe: the polynomial of degree ≤ t − 2 through
    // the t − 1 shares misses f(0) by c·Π x_j, which over many dealings must take every value of
    // GF(2⁸) and look uniform in GF(2¹⁶). A dealing of degree t − 2 (one coefficient short) gives
    // a miss of 0 every time: the t − 1 shares then determine the secret, and at t = 2 every share
    // is the secret.
    let mut rng = ChaCha20Rng::seed_from_u64(14);
    for count in [255u16, 300] {
        for t in [2u16, 3, 5, 17] {
            let mut misses = std::collections::BTreeSet::new();
            let mut samples = 0usize;
            for _ in 0..200 {
                let s = random_secret(&mut rng);
                let mut shares = split(&s, t, count, &mut rng).expect("split");
                shares.shuffle(&mut rng);
                let guess = at_zero_through(&shares[..usize::from(t) - 1]);
                let miss: Vec<u8> = guess.iter().zip(&s).map(|(g, s)| g ^ s).collect();
                match shares[0].field() {
                    Field::Gf256 => misses.extend(miss.iter().map(|&b| u16::from(b))),
                    Field::Gf65536 => misses.extend(
                        miss.chunks_exact(2)
                            .map(|pair| u16::from_le_bytes([pair[0], pair[1]])),
                    ),
                }
                samples += miss.len() / field_bytes(shares[0].field());
            }
            match Field::for_count(u32::from(count)).expect("a field") {
                Field::Gf256 => assert_eq!(misses.len(), 256, "t = {t}: misses {misses:?}"),
                // 3 200 draws from 65 536 values: about 78 repeats expected.
                Field::Gf65536 => assert!(
                    misses.len() * 10 > samples * 9,
                    "t = {t}: {} distinct misses of {samples}",
                    misses.len()
                ),
            }
        }
    }
}

/// Bytes per field element.
fn field_bytes(field: Field) -> usize {
    match field {
        Field::Gf256 => 1,
        Field::Gf65536 => 2,
    }
}
