use std::os::unix::fs::PermissionsExt;

use super::*;

#[test]
fn a_missing_key_is_created_owner_only_and_read_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = key_path(None, dir.path());
    let created = load_or_create(&path, "privpca.example.org").unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(created.origin, "privpca.example.org");
    assert_eq!(created.signer.name(), "privpca.example.org/key-1");
    let again = load_or_create(&path, "another.example").unwrap();
    assert_eq!(again.verifier_key(), created.verifier_key());
    assert_eq!(again.log_origin("datasets/x"), "privpca.example.org/datasets/x");
    let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(leftovers, 1, "no temporary file stays behind");
}

#[test]
fn a_key_others_can_read_or_that_does_not_parse_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("key");
    load_or_create(&path, "privpca.example.org").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let err = format!("{:#}", load(&path).unwrap_err());
    assert!(err.contains("readable by others"), "{err}");
    std::fs::write(&path, "PRIVATE+KEY+nonsense\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = format!("{:#}", load(&path).unwrap_err());
    assert!(err.contains("does not parse"), "{err}");
}

#[test]
fn a_key_name_must_be_origin_slash_key_number() {
    assert_eq!(origin_of("a.example/key-12").as_deref(), Some("a.example"));
    assert_eq!(origin_of("a.example/key-"), None);
    assert_eq!(origin_of("a.example/keys"), None);
    assert_eq!(origin_of("/key-1"), None);
}
