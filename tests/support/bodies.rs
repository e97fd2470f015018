//! Request bodies more than one test binary sends.

use serde_json::{Value, json};

/// A live `gossip_power` study body: d = 12 split into the sites' blocks `sizes` (in site
/// order), a ring, k = 2, ρ = 5, rows bounded by 1 under replace_one.
pub fn gossip_study(sizes: &[usize]) -> Value {
    json!({
        "name": "gossip",
        "algorithm": "gossip_power",
        "n_features": 12,
        "relation": "replace_one",
        "row_norm_bound": 1.0,
        "params": {"k": 2, "graph": "ring"},
        "privacy": {"rho": 5.0},
        "sites": sizes.iter().enumerate().map(|(i, d)| json!({"name": format!("a{i}"), "n_features": d})).collect::<Vec<_>>(),
    })
}
