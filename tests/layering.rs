//! The numerical core (`linalg`, `privacy`, `algorithms`) and the pure `transparency` log never
//! import the web, the database, the async runtime or the service's layers above them (src/lib.rs,
//! "Layout"). Checked on the source text, so a new import of that kind fails here rather than in
//! a review. (The core still reaches `federation` and `protocols` for the simulated protocols:
//! issue 37 untangles that; until then those two are allowed.)

use std::path::{Path, PathBuf};

/// Crates of I/O the core must not name.
const IO_CRATES: [&str; 9] = [
    "axum",
    "sqlx",
    "tokio",
    "reqwest",
    "tower",
    "hyper",
    "utoipa",
    "tracing",
    "object_store",
];
/// The service's layers above the core.
const LAYERS: [&str; 14] = [
    "http",
    "store",
    "app",
    "studies",
    "site",
    "runner",
    "serve",
    "state",
    "job_control",
    "metrics",
    "rate_limits",
    "config",
    "telemetry",
    "objects",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read source dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The forbidden names `line` uses: `crate_name::` of an I/O crate, or `crate::layer`.
fn offences(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut found = Vec::new();
    for name in IO_CRATES {
        let bounded = code.match_indices(&format!("{name}::")).any(|(i, _)| {
            i == 0 || !code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
        });
        if bounded {
            found.push(format!("{name}::"));
        }
    }
    for layer in LAYERS {
        for prefix in ["crate::", "privpca::"] {
            let path = format!("{prefix}{layer}");
            if code
                .match_indices(&path)
                .any(|(i, _)| !code[i + path.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_'))
            {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn the_numerical_core_imports_no_io_and_no_service_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for core in ["linalg", "privacy", "algorithms", "transparency", "forecast"] {
        rust_files(&root.join(core), &mut files);
    }
    assert!(files.len() > 50, "found the core's files: {}", files.len());
    let mut wrong = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        for (i, line) in text.lines().enumerate() {
            for name in offences(line) {
                wrong.push(format!("{}:{}: {name}", file.display(), i + 1));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the numerical core imports I/O or a service layer:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_check_sees_what_it_forbids() {
    assert_eq!(offences("use sqlx::Row;"), ["sqlx::"]);
    assert_eq!(offences("    let x = tokio::spawn(f);"), ["tokio::"]);
    assert_eq!(offences("use crate::store::Store;"), ["crate::store"]);
    assert_eq!(offences("use crate::http;"), ["crate::http"]);
    assert!(offences("use crate::storage::x; // sqlx:: in a comment").is_empty());
    assert!(offences("use crate::linalg::Matrix;").is_empty());
    assert!(offences("let a = my_tokio::x;").is_empty());
    assert!(offences("use crate::statistics;").is_empty());
}
