use super::*;

#[test]
fn the_kept_checkpoint_lives_beside_the_ledger_and_a_different_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("site.ledger");
    let study = Uuid::new_v4();
    let fresh = StudyWitness::open(&ledger, study, None).unwrap();
    assert_eq!(
        fresh.file,
        dir.path().join(format!("site.ledger.study-{study}.checkpoint"))
    );
    assert!(fresh.pinned.is_none() && fresh.last.is_none());
    let mut witness =
        StudyWitness::open(&ledger, study, Some("privpca.local/key-1+00000000+AQ==\n")).unwrap();
    witness
        .keep("privpca.local/key-1+00000000+AQ==", "origin\n1\nroot\n")
        .unwrap();
    let again = StudyWitness::open(&ledger, study, None).unwrap();
    assert_eq!(again.pinned.as_deref(), Some("privpca.local/key-1+00000000+AQ=="));
    assert_eq!(again.last.as_deref(), Some("origin\n1\nroot\n"));
    assert!(matches!(
        StudyWitness::open(&ledger, study, Some("other/key-1+00000000+AQ==")),
        Err(Failure::Refused(_))
    ));
    std::fs::write(&witness.file, "not json").unwrap();
    assert!(matches!(
        StudyWitness::open(&ledger, study, None),
        Err(Failure::Refused(_))
    ));
}
