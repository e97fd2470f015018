//! Docs that cannot go stale silently: every repository path, code item and bench a document
//! cites must exist. The conventions checked (docs/design/README.md, "Citing code"):
//!
//! - a path from the repository root (`crates/core/src/privacy/target.rs`, `tests/api/`, `scripts/…`,
//!   `benches/…`, `migrations/…`, `examples/…`, `docs/…`), backticked or not, names an existing
//!   file or directory; a backticked file name (`cost.rs`, `algorithms/auto.rs`) names a file
//!   somewhere in the repository;
//! - a backticked `path.rs::item` names a file that defines `item`;
//! - a backticked module path (`privacy::target::within`, `plan::describe`) starts at a module of
//!   the crate or of its tests and benches (a `name.rs` file or a `name/` directory anywhere) and
//!   each later segment is a child module or an item defined (or re-exported) in it; a
//!   backticked `Type::member` names a type defined in the repository and a member (function,
//!   constant, variant or field) defined where the type is defined or implemented; a backticked
//!   `CamelCase` name alone is a type or enum variant defined in the repository;
//! - `--bench name`, `--example name` and `--test name` name a target that exists;
//! - a relative Markdown link names an existing file, and every page of docs/design/ is listed
//!   in docs/design/README.md;
//! - a section citation `privacy.md §2.4`, in the docs or in any Rust file's comments, names a
//!   heading numbered 2.4 in that page.
//!
//! Names outside the repository (`tokio::…`, `faer`'s `Par::Seq`) are listed in `EXTERNAL` (citations.rs).
//! A failure lists every stale citation as `doc:line: citation: what is missing`.

mod citations;
mod repo;

use std::collections::BTreeSet;
use std::path::Path;

use citations::{check_doc, stale_sections};
use repo::Repo;

/// Citations known to be stale in pages someone else is rewriting right now, as
/// `(document, citation)`. The test fails when one of them is no longer stale, so the list only
/// shrinks.
const KNOWN_STALE: &[(&str, &str)] = &[];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The documents checked: every Markdown page under docs/ and the README.
fn documents(repo: &Repo) -> Vec<String> {
    let mut docs: Vec<String> = repo
        .files
        .iter()
        .filter(|f| f.starts_with("docs/") && f.ends_with(".md"))
        .cloned()
        .collect();
    docs.push("README.md".to_string());
    docs
}

#[test]
fn every_cited_path_item_and_bench_exists() {
    let repo = Repo::load(root());
    let mut report = Vec::new();
    let mut known = BTreeSet::new();
    for doc in documents(&repo) {
        let text = std::fs::read_to_string(root().join(&doc)).expect("document");
        for p in check_doc(&repo, &doc, &text) {
            if KNOWN_STALE.contains(&(doc.as_str(), p.citation.as_str())) {
                known.insert((doc.clone(), p.citation.clone()));
                continue;
            }
            report.push(format!("{doc}:{}: `{}`: {}", p.line, p.citation, p.missing));
        }
    }
    for (doc, citation) in KNOWN_STALE {
        if !known.contains(&(doc.to_string(), citation.to_string())) {
            report.push(format!(
                "{doc}: `{citation}` is fixed: remove it from KNOWN_STALE in tests/docs/main.rs"
            ));
        }
    }
    assert!(
        report.is_empty(),
        "{} stale citation(s) in the docs (fix the doc, or the convention in tests/docs/):\n{}",
        report.len(),
        report.join("\n")
    );
}

/// Code and docs cite design sections by number ("privacy.md §2.4"); each must exist.
#[test]
fn every_cited_section_exists() {
    let repo = Repo::load(root());
    let mut report = Vec::new();
    let mut texts: Vec<(String, String)> = repo
        .sources
        .iter()
        .filter(|(path, _)| !path.starts_with("tests/docs/"))
        .map(|(path, text)| (path.clone(), text.clone()))
        .collect();
    for doc in documents(&repo) {
        let text = std::fs::read_to_string(root().join(&doc)).expect("document");
        texts.push((doc, text));
    }
    for (path, text) in &texts {
        for (line, problem) in stale_sections(&repo, root(), text) {
            report.push(format!("{path}:{line}: {problem}"));
        }
    }
    let fake = stale_sections(&repo, root(), "see privacy.md §2.4, `privacy.md` §9.9");
    assert_eq!(fake.len(), 1, "the checker finds a made-up section: {fake:?}");
    report.sort();
    assert!(
        report.is_empty(),
        "{} stale section citation(s):\n{}",
        report.len(),
        report.join("\n")
    );
}

#[test]
fn the_design_readme_lists_every_design_page() {
    let readme = std::fs::read_to_string(root().join("docs/design/README.md")).expect("README");
    let repo = Repo::load(root());
    let missing: Vec<&String> = repo
        .files
        .iter()
        .filter(|f| f.starts_with("docs/design/") && f.ends_with(".md"))
        .filter(|f| !f.ends_with("/README.md"))
        .filter(|f| {
            let name = f.trim_start_matches("docs/design/");
            !readme.contains(&format!("]({name})"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/design/README.md links no page for: {missing:?}"
    );
}

#[test]
fn the_checker_reports_made_up_citations() {
    let repo = Repo::load(root());
    let fake = "\
Real: `crates/core/src/privacy/target.rs`, `crates/core/src/privacy/target.rs::within`, `privacy::target::within`,
`plan::describe`, `Cost::gaussian`, `PrivacyTarget`, `SeedNotAllowed`, `cost.rs`, `cargo bench --bench noise`, tests/readme.rs,
[noise](design/noise.md), `tokio::task::block_in_place`.
Made up: `crates/core/src/privacy/made_up.rs`, `crates/core/src/privacy/target.rs::no_such_fn`,
`privacy::target::no_such_fn`, `no_such_module::f`, `Cost::no_such_method`, `NoSuchType::f`, `NoSuchType`,
`made_up.rs`, `cargo bench --bench no_such_bench`, scripts/no-such.sh,
[gone](design/gone.md). Not ours, not checked: `diffprivlib/mechanisms/bingham.py`.
";
    let problems = check_doc(&repo, "docs/fake.md", fake);
    let cited: Vec<(usize, &str)> = problems.iter().map(|p| (p.line, p.citation.as_str())).collect();
    assert_eq!(
        cited,
        [
            (4, "crates/core/src/privacy/made_up.rs"),
            (4, "crates/core/src/privacy/target.rs::no_such_fn"),
            (5, "privacy::target::no_such_fn"),
            (5, "no_such_module::f"),
            (5, "Cost::no_such_method"),
            (5, "NoSuchType::f"),
            (5, "NoSuchType"),
            (6, "scripts/no-such.sh"),
            (6, "made_up.rs"),
            (6, "--bench no_such_bench"),
            (7, "design/gone.md"),
        ],
        "{problems:#?}"
    );
    assert!(problems[0].missing.contains("crates/core/src/privacy/made_up.rs"));
}
