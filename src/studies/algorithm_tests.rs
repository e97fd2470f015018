use super::StudyAlgorithm;

/// Every algorithm the catalog marks as runnable across sites has a planner, and no other.
#[test]
fn planners_match_the_catalog() {
    let catalog = crate::algorithms::study_algorithms();
    for info in crate::algorithms::registry().iter().map(|a| a.info()) {
        assert_eq!(
            StudyAlgorithm::from_name(info.name).is_some(),
            catalog.contains(&info.name),
            "{}",
            info.name
        );
    }
    assert_eq!(
        catalog,
        ["federated_power", "cape_pca", "gossip_power", "cape_agn"]
    );
}
