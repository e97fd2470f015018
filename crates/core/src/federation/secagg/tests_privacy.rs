//! What the coordinator can learn: a single masked vector is uniform whatever the input, and
//! the masking secret revealed for a site dropped in round r removes no mask of another round.

use super::*;

/// Chi-square of the top byte over 256 bins, and the largest |z| of the 64 bit frequencies.
fn uniformity(words: &[u64]) -> (f64, f64) {
    let mut bins = [0_u64; 256];
    let mut ones = [0_u64; 64];
    for &w in words {
        bins[(w >> 56) as usize] += 1;
        for (bit, count) in ones.iter_mut().enumerate() {
            *count += (w >> bit) & 1;
        }
    }
    let n = words.len() as f64;
    let expected = n / 256.0;
    let chi2 = bins
        .iter()
        .map(|&c| (c as f64 - expected).powi(2) / expected)
        .sum();
    let z = ones
        .iter()
        .map(|&c| ((c as f64 - n / 2.0) / (n / 4.0).sqrt()).abs())
        .fold(0.0, f64::max);
    (chi2, z)
}

/// Two-sample chi-square of the top-byte histograms (df = 255).
fn homogeneity(a: &[u64], b: &[u64]) -> f64 {
    let (mut ha, mut hb) = ([0_u64; 256], [0_u64; 256]);
    a.iter().for_each(|&w| ha[(w >> 56) as usize] += 1);
    b.iter().for_each(|&w| hb[(w >> 56) as usize] += 1);
    ha.iter()
        .zip(&hb)
        .filter(|(x, y)| **x + **y > 0)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2) / (x + y) as f64)
        .sum()
}

#[test]
fn a_masked_vector_is_uniform() {
    // Bounds at p = 1e-6 (Wilson–Hilferty for χ²₂₅₅: 161.5 and 377.2; |z| two-sided: 4.89).
    let (low, high, z_max) = (161.0, 378.0, 4.9);
    let len = 40_000;
    let mut zero_run = study(&[1, 2, 3], 2, 1, 8);
    let zeros = BTreeMap::from([(1, vec![0_u64; len])]);
    let masked_zero = zero_run.mask(1, &[1, 2, 3], &zeros).remove(&1).expect("site 1");
    let mut x_run = study(&[1, 2, 3], 2, 1, 9);
    let x: Vec<u64> = (0..len as u64).map(|i| i % 1000 * (1 << 40)).collect();
    let masked_x = x_run
        .mask(1, &[1, 2, 3], &BTreeMap::from([(1, x.clone())]))
        .remove(&1)
        .expect("site 1");
    for (name, words) in [("0", &masked_zero), ("x", &masked_x)] {
        let (chi2, z) = uniformity(words);
        assert!(chi2 > low && chi2 < high, "input {name}: top-byte χ² = {chi2}");
        assert!(z < z_max, "input {name}: bit frequency |z| = {z}");
    }
    let between = homogeneity(&masked_zero, &masked_x);
    assert!(between > low && between < high, "0 vs x: χ² = {between}");
    // Control: the same statistics do see the structure of x itself.
    let (chi2, z) = uniformity(&x);
    assert!(chi2 > high && z > z_max, "unmasked x: χ² = {chi2}, |z| = {z}");
    assert!(homogeneity(&masked_zero, &x) > high);
}

#[test]
fn revealing_a_later_masking_key_exposes_no_earlier_round() {
    let mut s = study(&[1, 2, 3], 2, 2, 10);
    let roster = [1, 2, 3];
    // Round 1: everyone survives, so the server learns b_{3,1}.
    let round1 = s.random_inputs(&roster, 64);
    let masked1 = s.mask(1, &roster, &round1);
    let responses1 = s.respond(1, &roster, &masked1, &roster);
    assert_eq!(
        s.aggregator
            .unmask_sum(1, &roster, &masked1, &responses1)
            .expect("unmask"),
        wrapping_sum(&round1)
    );
    // Round 2: site 3 drops, so the server learns s_{3,2}.
    let round2 = s.random_inputs(&[1, 2], 64);
    let masked2 = s.mask(2, &roster, &round2);
    let responses2 = s.respond(2, &roster, &masked2, &[1, 2]);
    assert_eq!(
        s.aggregator
            .unmask_sum(2, &roster, &masked2, &responses2)
            .expect("unmask"),
        wrapping_sum(&round2)
    );

    let recover = |responses: &BTreeMap<u32, UnmaskRequest>, self_mask: bool, site: u32| {
        let shares: Vec<Share> = responses
            .values()
            .flat_map(|r| {
                if self_mask {
                    &r.self_mask_shares
                } else {
                    &r.mask_key_shares
                }
            })
            .filter(|r| r.site == site)
            .map(|r| Share::from_bytes(&wire::decode(&r.share).expect("base64")).expect("share"))
            .collect();
        shamir::combine(&shares, 2).expect("t shares")
    };
    let s32 = recover(&responses2, false, 3);
    let b31 = recover(&responses1, true, 3);
    assert_eq!(
        s32,
        s.site(3).masking_secret(2),
        "the server does learn s_{{3,2}}"
    );
    let s31 = s.site(3).masking_secret(1);
    assert_ne!(s32, s31);

    // The attack a single masking key would allow: z_{3,1} − PRG(b_{3,1}) − pair masks.
    let keys: Vec<[u8; 32]> = s
        .participants
        .iter()
        .map(|p| wire::decode_key(&p.mask_public_keys[0]).expect("key"))
        .collect();
    let unmask_site3 = |secret: &[u8; 32]| {
        let mut z = masked1[&3].clone();
        crypto::add_prg(
            &mut z,
            &crypto::self_seed(&b31, s.id, 1, 3).expect("derive"),
            true,
        );
        for j in [1_u32, 2] {
            let shared = crypto::agree(secret, &keys[j as usize - 1]).expect("agree");
            let seed = crypto::pair_seed(&shared, s.id, 1, 3, j).expect("derive");
            crypto::add_prg(&mut z, &seed, false); // site 3 subtracted its masks with j < 3
        }
        z
    };
    assert_eq!(
        unmask_site3(&s31),
        round1[&3],
        "control: the round-1 key would expose x_3"
    );
    let attempt = unmask_site3(&s32);
    let hits = attempt.iter().zip(&round1[&3]).filter(|(a, b)| a == b).count();
    assert_eq!(hits, 0, "s_{{3,2}} does not remove round-1 masks");
    for j in [1_u32, 2] {
        let true_seed = crypto::pair_seed(
            &crypto::agree(&s31, &keys[j as usize - 1]).expect("agree"),
            s.id,
            1,
            3,
            j,
        );
        let guessed = crypto::pair_seed(
            &crypto::agree(&s32, &keys[j as usize - 1]).expect("agree"),
            s.id,
            1,
            3,
            j,
        );
        assert_ne!(true_seed.expect("derive"), guessed.expect("derive"));
    }
}
