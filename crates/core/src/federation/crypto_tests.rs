//! Tests of the secure-aggregation primitives: agreement, derivations, PRG and share boxes.

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::*;

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn study(byte: u8) -> Uuid {
    Uuid::from_bytes([byte; 16])
}

#[test]
fn key_pairs_are_reproducible_from_their_secret() {
    let a = KeyPair::generate(&mut rng(1));
    let b = KeyPair::from_secret(a.secret_bytes());
    assert_eq!(a.public(), b.public());
    assert_ne!(a.public(), KeyPair::generate(&mut rng(2)).public());
    assert!(!format!("{a:?}").contains("secret:"), "Debug shows no secret");
}

#[test]
fn agreement_is_symmetric() {
    let mut r = rng(3);
    let (a, b) = (KeyPair::generate(&mut r), KeyPair::generate(&mut r));
    let ab = agree(&a.secret_bytes(), &b.public()).expect("contributory");
    let ba = agree(&b.secret_bytes(), &a.public()).expect("contributory");
    assert_eq!(ab, ba);
    assert_ne!(ab, [0u8; 32]);
}

#[test]
fn small_order_public_keys_are_refused() {
    let a = KeyPair::generate(&mut rng(4));
    let mut one = [0u8; 32];
    one[0] = 1;
    for low_order in [[0u8; 32], one] {
        assert_eq!(
            agree(&a.secret_bytes(), &low_order),
            Err(CryptoError::NonContributory)
        );
    }
}

#[test]
fn pair_seeds_are_symmetric_and_bound_to_their_context() {
    let shared = [9u8; 32];
    let seed = pair_seed(&shared, study(1), 2, 3, 5).expect("derive");
    assert_eq!(seed, pair_seed(&shared, study(1), 2, 5, 3).expect("derive"));
    for other in [
        pair_seed(&shared, study(2), 2, 3, 5),
        pair_seed(&shared, study(1), 3, 3, 5),
        pair_seed(&shared, study(1), 2, 3, 4),
        pair_seed(&[8u8; 32], study(1), 2, 3, 5),
        self_seed(&shared, study(1), 2, 3),
    ] {
        assert_ne!(seed, other.expect("derive"));
    }
}

#[test]
fn self_seeds_depend_on_round_and_site() {
    let b = [7u8; 32];
    let seed = self_seed(&b, study(1), 1, 1).expect("derive");
    assert_ne!(seed, self_seed(&b, study(1), 2, 1).expect("derive"));
    assert_ne!(seed, self_seed(&b, study(1), 1, 2).expect("derive"));
    assert_ne!(seed, self_seed(&b, study(2), 1, 1).expect("derive"));
    assert_eq!(seed, self_seed(&b, study(1), 1, 1).expect("derive"));
}

#[test]
fn prg_is_chacha20_with_a_zero_nonce() {
    // RFC 7539 §2.3.2 / the classic all-zero key test vector: keystream 76 b8 e0 ad a0 f1 3d 90 …
    let words = prg_words(&[0u8; 32], 2);
    assert_eq!(
        words[0],
        u64::from_le_bytes([0x76, 0xb8, 0xe0, 0xad, 0xa0, 0xf1, 0x3d, 0x90])
    );
    assert_eq!(
        words[1],
        u64::from_le_bytes([0x40, 0x5d, 0x6a, 0xe5, 0x53, 0x86, 0xbd, 0x28])
    );
    let mut direct = ChaCha20Rng::from_seed([5u8; 32]);
    let expected: Vec<u64> = (0..10).map(|_| direct.next_u64()).collect();
    assert_eq!(prg_words(&[5u8; 32], 10), expected);
}

#[test]
fn adding_then_subtracting_a_prg_is_the_identity() {
    let seed = [3u8; 32];
    let original = vec![0, 1, u64::MAX, 1 << 63, 42];
    let mut acc = original.clone();
    add_prg(&mut acc, &seed, false);
    assert_ne!(acc, original);
    let words = prg_words(&seed, acc.len());
    let expected: Vec<u64> = original
        .iter()
        .zip(&words)
        .map(|(x, w)| x.wrapping_add(*w))
        .collect();
    assert_eq!(acc, expected);
    add_prg(&mut acc, &seed, true);
    assert_eq!(acc, original);
}

#[test]
fn boxes_open_only_in_their_direction_and_study() {
    let mut r = rng(5);
    let (a, b) = (KeyPair::generate(&mut r), KeyPair::generate(&mut r));
    let shared_a = agree(&a.secret_bytes(), &b.public()).expect("agree");
    let shared_b = agree(&b.secret_bytes(), &a.public()).expect("agree");
    let sealed = seal(&shared_a, study(1), 1, 2, b"shares", &mut r).expect("seal");
    assert_eq!(sealed.len(), 12 + 6 + 16);
    assert_eq!(open(&shared_b, study(1), 1, 2, &sealed).expect("open"), b"shares");
    assert_eq!(
        open(&shared_b, study(1), 2, 1, &sealed),
        Err(CryptoError::Open),
        "reversed"
    );
    assert_eq!(
        open(&shared_b, study(1), 1, 3, &sealed),
        Err(CryptoError::Open),
        "other recipient"
    );
    assert_eq!(
        open(&shared_b, study(2), 1, 2, &sealed),
        Err(CryptoError::Open),
        "other study"
    );
    assert_eq!(
        open(&[1u8; 32], study(1), 1, 2, &sealed),
        Err(CryptoError::Open),
        "other key"
    );
}

#[test]
fn tampered_or_truncated_boxes_are_refused() {
    let mut r = rng(6);
    let shared = [4u8; 32];
    let sealed = seal(&shared, study(1), 1, 2, &[0u8; 66], &mut r).expect("seal");
    for i in [0, 12, sealed.len() - 1] {
        let mut tampered = sealed.clone();
        tampered[i] ^= 1;
        assert_eq!(
            open(&shared, study(1), 1, 2, &tampered),
            Err(CryptoError::Open),
            "byte {i}"
        );
    }
    assert!(matches!(
        open(&shared, study(1), 1, 2, &sealed[..27]),
        Err(CryptoError::Truncated { got: 27, min: 28 })
    ));
    let again = seal(&shared, study(1), 1, 2, &[0u8; 66], &mut r).expect("seal");
    assert_ne!(sealed, again, "fresh nonce each time");
}

/// `add_prg` reads the stream in blocks of bytes; it gives exactly the words `next_u64`
/// gives one by one (sites and coordinators of different builds must agree on every mask),
/// across block boundaries and for both signs.
#[test]
fn block_prg_words_equal_next_u64_words() {
    use rand::{RngCore, SeedableRng};
    let seed = [7u8; 32];
    for len in [0, 1, 2, 63, 64, 65, 511, 512, 513, 1025, 20_000] {
        let mut reference = rand_chacha::ChaCha20Rng::from_seed(seed);
        let want: Vec<u64> = (0..len).map(|_| reference.next_u64()).collect();
        assert_eq!(prg_words(&seed, len), want, "len {len}");
        let start: Vec<u64> = (0..len as u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        let mut down = start.clone();
        add_prg(&mut down, &seed, true);
        let expect: Vec<u64> = start.iter().zip(&want).map(|(a, m)| a.wrapping_sub(*m)).collect();
        assert_eq!(down, expect, "negated, len {len}");
    }
}
