//! The command-line flags of the figure benches (`#[path = "support/cli.rs"] mod cli;`):
//! `--quick` for a smaller run, `--reps N` for the number of repetitions. Nothing here is part
//! of the service.

#![allow(dead_code)]

use std::str::FromStr;

/// Whether `--quick` was given.
pub fn quick() -> bool {
    std::env::args().any(|a| a == "--quick")
}

/// The value after `--reps`, or `default` when it is missing or does not parse.
pub fn reps<T: FromStr>(default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--reps")
        .and_then(|i| args.get(i + 1))
        .and_then(|r| r.parse().ok())
        .unwrap_or(default)
}
