use super::*;
use crate::algorithms::find;
use crate::algorithms::testing::{EN, RO, ctx};

#[test]
fn the_rule_follows_public_facts() {
    assert_eq!(candidates(&ctx(30, Some(100), RO))[0].0, "analyze_gauss");
    assert_eq!(candidates(&ctx(5_000, None, RO))[0].0, "noisy_power");
    assert_eq!(candidates(&ctx(30, None, EN))[0].0, "analyze_gauss");
    let public = crate::dataset::DataContext {
        public: true,
        ..ctx(30, Some(100), RO)
    };
    assert_eq!(candidates(&public)[0].0, "exact");
    // Every candidate exists.
    for c in [ctx(30, Some(100), RO), ctx(5_000, None, RO), public] {
        for (name, _) in candidates(&c) {
            assert!(find(name).is_some(), "{name}");
        }
    }
}
