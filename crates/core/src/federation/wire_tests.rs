use super::*;

#[test]
fn bytes_round_trip_with_padding() {
    assert_eq!(encode(b"ab"), "YWI=");
    assert_eq!(decode("YWI=").expect("valid"), b"ab");
    assert!(
        matches!(decode("YWI"), Err(WireError::Base64(_))),
        "padding is required"
    );
    assert!(matches!(decode("YW*="), Err(WireError::Base64(_))));
    assert_eq!(decode("").expect("empty is valid"), Vec::<u8>::new());
}

#[test]
fn keys_are_exactly_32_bytes() {
    let key = [7u8; 32];
    assert_eq!(decode_key(&encode(&key)).expect("32 bytes"), key);
    let err = decode_key(&encode(&[7u8; 31])).expect_err("31 bytes");
    assert_eq!(err, WireError::KeyLength { got: 31 });
    assert!(err.to_string().contains("32-byte"));
    assert!(decode_key(&encode(&[7u8; 33])).is_err());
}

#[test]
fn words_round_trip_little_endian() {
    let words = [0_u64, 1, u64::MAX, 0x0102_0304_0506_0708];
    let text = words_to_b64(&words);
    assert_eq!(b64_to_words(&text, 4).expect("4 words"), words);
    assert_eq!(
        decode(&words_to_b64(&[1])).expect("valid"),
        [1, 0, 0, 0, 0, 0, 0, 0]
    );
}

#[test]
fn wrong_word_count_says_expected_and_got() {
    let text = words_to_b64(&[1, 2, 3]);
    let err = b64_to_words(&text, 4).expect_err("3 words, not 4");
    let message = err.to_string();
    assert!(message.contains("expected 4 u64 values (32 bytes)"), "{message}");
    assert!(message.contains("got 24 bytes"), "{message}");
    assert!(
        b64_to_words(&encode(&[0u8; 17]), 2).is_err(),
        "not a multiple of 8"
    );
}

#[test]
fn f64s_round_trip_and_refuse_non_finite() {
    let values = [0.0, -1.5, f64::MIN_POSITIVE, 1e300, -0.0];
    let back = b64_to_f64s(&f64s_to_b64(&values), 5).expect("finite");
    assert_eq!(
        back.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let err = b64_to_f64s(&f64s_to_b64(&[1.0, bad]), 2).expect_err("non-finite");
        assert_eq!(err, WireError::NonFinite { index: 1 });
    }
    assert!(b64_to_f64s(&f64s_to_b64(&[1.0]), 2).is_err());
}
