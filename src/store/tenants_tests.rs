use super::*;

#[test]
fn api_keys_have_the_documented_shape_and_differ() {
    let a = new_api_key().expect("entropy");
    let b = new_api_key().expect("entropy");
    assert!(a.starts_with(API_KEY_PREFIX));
    assert_eq!(a.len(), API_KEY_PREFIX.len() + 64);
    assert!(a[API_KEY_PREFIX.len()..].bytes().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, b);
    assert_eq!(key_hash(&a).len(), 64);
    assert_ne!(key_hash(&a), key_hash(&b));
}
