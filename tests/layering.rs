//! The numerical core is its own crate, `privpca-core` (crates/core), and depends on no web,
//! database, async runtime or logging package: checked on `cargo tree`, so the rule is Cargo's
//! (issue 37). It cannot name the service's layers at all (the service depends on it, not the
//! other way). The source-text check below stays for what Cargo allows the crate as a whole
//! but not its inner layers: `linalg`, `privacy`, `algorithms`, `transparency` and `forecast`
//! name neither `utoipa` (the site messages' schemas, in `federation`) nor the service.

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
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/src");
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

/// Packages the numerical core crate must not depend on, directly or through another crate:
/// the web (axum, hyper, tower, reqwest), the database (sqlx), the async runtime (tokio), the
/// object store, and logging (tracing: a log line is a channel out of the service, and the core
/// holds the data).
const FORBIDDEN_PACKAGES: [&str; 9] = [
    "tokio",
    "axum",
    "hyper",
    "tower",
    "sqlx",
    "reqwest",
    "object_store",
    "tracing",
    "utoipa-axum",
];

/// The names in `cargo tree --prefix none` output that are forbidden packages.
fn forbidden_in_tree(tree: &str) -> Vec<String> {
    let mut found: Vec<String> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|package| {
            FORBIDDEN_PACKAGES
                .iter()
                .any(|f| package == f || package.strip_prefix(f).is_some_and(|rest| rest.starts_with('-')))
        })
        .map(str::to_string)
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Issue 37: the rule is Cargo's, not a grep's. `cargo tree -p privpca-core` (every edge kind:
/// normal, build and dev) lists no web, database, runtime or logging package.
#[test]
fn the_core_crate_depends_on_no_web_database_or_runtime() {
    let output = std::process::Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "tree",
            "-p",
            "privpca-core",
            "--prefix",
            "none",
            "--edges",
            "normal,build,dev",
            "--offline",
        ])
        .output()
        .expect("run cargo tree");
    let tree = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        tree.lines().any(|l| l.starts_with("faer ")),
        "not the core's tree:\n{tree}"
    );
    assert_eq!(forbidden_in_tree(&tree), Vec::<String>::new(), "{tree}");
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
    let tree = "privpca-core v0.2.0 (/x)\nfaer v0.22.6\ntokio v1.54.1\ntower-http v0.6.0\ntokio-util v0.7.0\ntracing-core v0.1.0\ntoken v1.0.0\ntowerish v1.0.0\n";
    assert_eq!(
        forbidden_in_tree(tree),
        ["tokio", "tokio-util", "tower-http", "tracing-core"]
    );
    // The service crate's own tree does hold them: the check would see a regression.
    let output = std::process::Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "tree",
            "-p",
            "privpca",
            "--prefix",
            "none",
            "--edges",
            "normal",
            "--offline",
        ])
        .output()
        .expect("run cargo tree");
    let service = String::from_utf8_lossy(&output.stdout);
    for package in ["tokio", "axum", "sqlx", "tracing"] {
        assert!(
            forbidden_in_tree(&service).iter().any(|p| p == package),
            "{package} in the service's tree"
        );
    }
}
