//! Which algorithms run on sparse matrix datasets: a capability in the catalog
//! ([`AlgorithmInfo::sparse`]), checked here once for every entry point that prices a job.

use super::{AlgorithmInfo, ConfigError, registry};

/// `Err(Unsupported)` (422) when the dataset is stored sparse and the algorithm needs the
/// dense matrix; the message names the algorithms that do run on sparse data.
pub fn check_storage(info: &AlgorithmInfo, sparse: bool) -> Result<(), ConfigError> {
    if !sparse || info.sparse {
        return Ok(());
    }
    let runs: Vec<&str> = registry()
        .iter()
        .map(|a| a.info())
        .filter(|i| i.sparse)
        .map(|i| i.name)
        .collect();
    Err(ConfigError::Unsupported(format!(
        "algorithm `{}` needs the dense matrix and does not run on a sparse dataset (uploaded as Matrix Market, stored without densifying); on sparse data use {}",
        info.name,
        runs.join(", ")
    )))
}

#[cfg(test)]
#[path = "storage_tests.rs"]
mod tests;
