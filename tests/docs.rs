//! Docs that cannot go stale silently: every repository path, code item and bench a document
//! cites must exist. The conventions checked (docs/design/README.md, "Citing code"):
//!
//! - a path from the repository root (`src/privacy/target.rs`, `tests/api/`, `scripts/…`,
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
//! Names outside the repository (`tokio::…`, `faer`'s `Par::Seq`) are listed in `EXTERNAL`.
//! A failure lists every stale citation as `doc:line: citation: what is missing`.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

/// First segments of `a::b` citations, and backticked names, that name other crates, the
/// standard library, primitive types or non-Rust things, not this repository.
const EXTERNAL: &[&str] = &[
    "std",
    "core",
    "alloc",
    "io",
    "str",
    "fmt",
    "tokio",
    "axum",
    "sqlx",
    "rand",
    "rand_distr",
    "rand_chacha",
    "reqwest",
    "serde",
    "serde_json",
    "utoipa",
    "schemars",
    "faer",
    "nalgebra",
    "tower",
    "tower_http",
    "hyper",
    "clap",
    "tracing",
    "thiserror",
    "anyhow",
    "proptest",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "usize",
    "isize",
    "f32",
    "f64",
    "bool",
    "char",
    "Option",
    "Result",
    "Vec",
    "String",
    "Box",
    "Arc",
    "Mutex",
    "Par",
    "Duration",
    "Instant",
    "SystemTime",
    "HashMap",
    "BTreeMap",
    "Ordering",
    // Backticked names that are not Rust items of this repository.
    "ChaCha20Rng",
    "DMatrixView",
    "Dockerfile",
    "Drop",
    "GaussianDpEvent",
    "LaplaceDpEvent",
    "Location",
];

/// Citations known to be stale in pages someone else is rewriting right now, as
/// `(document, citation)`. The test fails when one of them is no longer stale, so the list only
/// shrinks.
const KNOWN_STALE: &[(&str, &str)] = &[
    // The lead rewrites architecture.md; JobControl moved to src/job_control.rs.
    ("docs/design/architecture.md", "runner::JobControl"),
];

/// Directories a root-relative path may start with.
const ROOTS: &[&str] = &[
    "src/",
    "tests/",
    "benches/",
    "scripts/",
    "migrations/",
    "examples/",
    "docs/",
];

/// File extensions that make a backticked word a file name to look up.
const FILE_EXTENSIONS: &[&str] = &[
    ".rs", ".sh", ".py", ".sql", ".md", ".toml", ".js", ".mjs", ".html", ".css",
];

/// The repository's files and the Rust sources' text.
struct Repo {
    files: BTreeSet<String>,
    dirs: BTreeSet<String>,
    /// Last components of every directory (`privacy`, `api`, …).
    dir_names: BTreeSet<String>,
    /// Directories that hold Rust code, directly or below.
    code_dirs: BTreeSet<String>,
    sources: HashMap<String, String>,
    /// For each type name, the files that define, implement or re-export it.
    type_files: HashMap<String, BTreeSet<String>>,
    /// Names that begin a line as an enum variant or a field does (`Name,`, `Name(`, `Name {`).
    variants: BTreeSet<String>,
    targets: BTreeSet<String>,
}

impl Repo {
    fn load(root: &Path) -> Repo {
        let mut repo = Repo {
            files: BTreeSet::new(),
            dirs: BTreeSet::new(),
            dir_names: BTreeSet::new(),
            code_dirs: BTreeSet::new(),
            sources: HashMap::new(),
            type_files: HashMap::new(),
            variants: BTreeSet::new(),
            targets: BTreeSet::new(),
        };
        for top in [
            "src",
            "tests",
            "benches",
            "scripts",
            "migrations",
            "examples",
            "docs",
            "assets",
            "deploy",
            "openapi",
            "experiments",
            ".ci",
        ] {
            repo.walk(root, top);
        }
        for entry in std::fs::read_dir(root).expect("repository root") {
            let entry = entry.expect("root entry");
            if entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
                repo.files
                    .insert(entry.file_name().to_string_lossy().into_owned());
            }
        }
        let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
        for line in manifest.lines() {
            if let Some(name) = line.trim().strip_prefix("name = \"") {
                repo.targets.insert(name.trim_end_matches('"').to_string());
            }
        }
        repo.index();
        repo
    }

    /// Directory names, directories with code, and where each type is defined or implemented.
    fn index(&mut self) {
        for dir in &self.dirs {
            let name = dir.rsplit('/').next().unwrap_or(dir);
            self.dir_names.insert(name.to_string());
        }
        for (path, text) in &self.sources {
            let mut dir = path.as_str();
            while let Some((parent, _)) = dir.rsplit_once('/') {
                self.code_dirs.insert(parent.to_string());
                dir = parent;
            }
            for line in text.lines() {
                let words: Vec<&str> = line
                    .split(|c: char| !is_ident_char(c))
                    .filter(|w| !w.is_empty())
                    .collect();
                let mut named = Vec::new();
                let trimmed = line.trim_start();
                if trimmed.starts_with("impl") || trimmed.starts_with("pub use") {
                    named.extend(words.iter().copied());
                }
                if let Some(first) = words.first()
                    && trimmed.starts_with(first)
                    && trimmed[first.len()..].starts_with([',', '(', '{', ' '])
                {
                    self.variants.insert(first.to_string());
                }
                for pair in words.windows(2) {
                    if ["struct", "enum", "trait", "type", "union"].contains(&pair[0]) {
                        named.push(pair[1]);
                    }
                }
                for name in named {
                    if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                        self.type_files
                            .entry(name.to_string())
                            .or_default()
                            .insert(path.clone());
                    }
                }
            }
        }
    }

    fn walk(&mut self, root: &Path, rel: &str) {
        let Ok(entries) = std::fs::read_dir(root.join(rel)) else {
            return;
        };
        self.dirs.insert(rel.to_string());
        for entry in entries {
            let entry = entry.expect("directory entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "node_modules" || name == "target" || name.starts_with('.') {
                continue;
            }
            let path = format!("{rel}/{name}");
            if entry.file_type().expect("file type").is_dir() {
                self.walk(root, &path);
            } else {
                if name.ends_with(".rs") {
                    let text = std::fs::read_to_string(root.join(&path)).unwrap_or_default();
                    self.sources.insert(path.clone(), text);
                }
                self.files.insert(path);
            }
        }
    }

    fn exists(&self, path: &str) -> bool {
        let path = path.trim_end_matches('/');
        self.files.contains(path) || self.dirs.contains(path)
    }

    /// Whether a file name or a relative path (`cost.rs`, `algorithms/auto.rs`) is the end of
    /// some repository path.
    fn has_file_ending(&self, name: &str) -> bool {
        let suffix = format!("/{name}");
        self.files.iter().any(|f| f == name || f.ends_with(&suffix))
    }

    /// The modules named `name`: `(file, directory)` for every `name.rs` or `name/` holding
    /// Rust code.
    fn modules(&self, name: &str) -> Vec<Module> {
        let mut found = Vec::new();
        let file_suffix = format!("/{name}.rs");
        for file in self.sources.keys() {
            if file.ends_with(&file_suffix) {
                let dir = file.trim_end_matches(".rs").to_string();
                let dir = self.dirs.contains(&dir).then_some(dir);
                found.push(Module {
                    file: Some(file.clone()),
                    dir,
                });
            }
        }
        let dir_suffix = format!("/{name}");
        for dir in &self.dirs {
            if dir.ends_with(&dir_suffix)
                && !self.sources.contains_key(&format!("{dir}.rs"))
                && self.code_dirs.contains(dir)
            {
                found.push(Module {
                    file: None,
                    dir: Some(dir.clone()),
                });
            }
        }
        found
    }

    fn child(&self, module: &Module, name: &str) -> Option<Module> {
        let dir = module.dir.as_ref()?;
        let file = format!("{dir}/{name}.rs");
        let sub = format!("{dir}/{name}");
        let file = self.sources.contains_key(&file).then_some(file);
        let sub = self.dirs.contains(&sub).then_some(sub);
        (file.is_some() || sub.is_some()).then_some(Module { file, dir: sub })
    }

    /// The text of a module: its file and every Rust file under its directory (so items a
    /// `mod.rs` re-exports from a child count).
    fn scope(&self, module: &Module) -> Vec<&str> {
        let mut texts = Vec::new();
        if let Some(file) = &module.file {
            texts.push(self.sources[file].as_str());
        }
        if let Some(dir) = &module.dir {
            let prefix = format!("{dir}/");
            for (path, text) in &self.sources {
                if path.starts_with(&prefix) {
                    texts.push(text.as_str());
                }
            }
        }
        texts
    }

    /// Files that define or implement the type `name`.
    fn type_scope(&self, name: &str) -> Vec<&str> {
        self.type_files
            .get(name)
            .into_iter()
            .flatten()
            .map(|path| self.sources[path].as_str())
            .collect()
    }
}

struct Module {
    file: Option<String>,
    dir: Option<String>,
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `word` occurs in `line` right after `keyword ` and followed by a non-identifier
/// character.
fn after_keyword(line: &str, keyword: &str, word: &str) -> bool {
    let pattern = format!("{keyword} {word}");
    line.match_indices(&pattern).any(|(at, _)| {
        let before_ok = line[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !is_ident_char(c) && c != '!');
        let after_ok = line[at + pattern.len()..]
            .chars()
            .next()
            .is_none_or(|c| !is_ident_char(c));
        before_ok && after_ok
    })
}

fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        before.is_none_or(|c| !is_ident_char(c)) && after.is_none_or(|c| !is_ident_char(c))
    })
}

/// Whether a line defines `name` as an item (function, type, constant, module, macro) or
/// re-exports it.
fn defines_item(line: &str, name: &str) -> bool {
    [
        "fn", "struct", "enum", "trait", "type", "union", "const", "static", "mod",
    ]
    .iter()
    .any(|k| after_keyword(line, k, name))
        || line.contains(&format!("macro_rules! {name}"))
        || (line.trim_start().starts_with("pub use") && has_word(line, name))
}

/// Whether a line defines `name` as a member of a type: a method, an associated constant, an
/// enum variant or a field.
fn defines_member(line: &str, name: &str) -> bool {
    if after_keyword(line, "fn", name) || after_keyword(line, "const", name) {
        return true;
    }
    let mut rest = line.trim_start();
    for visibility in ["pub(crate) ", "pub(super) ", "pub "] {
        rest = rest.strip_prefix(visibility).unwrap_or(rest);
    }
    let Some(after) = rest.strip_prefix(name) else {
        return false;
    };
    after.is_empty()
        || after.starts_with([',', '(', ':', '{'])
        || after.starts_with(" {")
        || after.starts_with(" =")
}

/// One stale citation.
#[derive(Debug)]
struct Problem {
    line: usize,
    citation: String,
    missing: String,
}

/// Every stale citation in one document's text.
fn check_doc(repo: &Repo, doc_path: &str, text: &str) -> Vec<Problem> {
    let doc_dir = Path::new(doc_path).parent().unwrap_or(Path::new(""));
    let mut problems = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let mut report = |citation: &str, missing: String| {
            problems.push(Problem {
                line: index + 1,
                citation: citation.to_string(),
                missing,
            })
        };
        for path in root_paths(line) {
            let checked = path.split(['*', '{']).next().unwrap_or(&path).to_string();
            let checked = if checked.len() < path.len() {
                // a pattern: its directory must exist
                checked[..checked.rfind('/').map_or(0, |i| i + 1)].to_string()
            } else {
                checked
            };
            if !repo.exists(&checked) {
                report(&path, format!("no file or directory {checked}"));
            }
        }
        for span in backticked(line) {
            check_span(repo, span, &mut report);
        }
        for (flag, dir) in [
            ("--bench ", "benches"),
            ("--example ", "examples"),
            ("--test ", "tests"),
        ] {
            for (at, _) in line.match_indices(flag) {
                let name: String = line[at + flag.len()..]
                    .chars()
                    .take_while(|&c| is_ident_char(c) || c == '-')
                    .collect();
                if name.is_empty() || name.starts_with('-') {
                    continue;
                }
                let found = repo.targets.contains(&name)
                    || repo.exists(&format!("{dir}/{name}.rs"))
                    || repo.exists(&format!("{dir}/{name}/main.rs"));
                if !found {
                    report(&format!("{flag}{name}"), format!("no target {name} in {dir}/"));
                }
            }
        }
        for target in link_targets(line) {
            let target = target.split('#').next().unwrap_or("");
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let joined = normalize(&doc_dir.join(target));
            if !repo.exists(&joined) {
                report(target, format!("link target {joined} does not exist"));
            }
        }
    }
    problems
}

/// Checks one backticked span: a file name, `path.rs::item`, a module path or `Type::member`.
fn check_span(repo: &Repo, span: &str, report: &mut impl FnMut(&str, String)) {
    let span = span.trim();
    if let Some((path, item)) = span.split_once(".rs::") {
        let path = format!("{path}.rs");
        let item: String = item.chars().take_while(|&c| is_ident_char(c)).collect();
        match repo.sources.get(&path) {
            None => report(span, format!("no file {path}")),
            Some(text) if !text.lines().any(|l| defines_item(l, &item)) => {
                report(span, format!("{path} defines no item {item}"))
            }
            Some(_) => {}
        }
        return;
    }
    let word = span.split_whitespace().next().unwrap_or("");
    if !word.contains("::")
        && FILE_EXTENSIONS.iter().any(|e| word.ends_with(e))
        && !ROOTS.iter().any(|r| word.starts_with(r))
        && !word.contains(['*', '{', '<', '$'])
        && !word.starts_with(['.', '/', '~'])
        && word
            .split_once('/')
            .is_none_or(|(first, _)| repo.dir_names.contains(first))
        && !repo.has_file_ending(word)
    {
        report(word, format!("no file named {word} in the repository"));
    }
    let segments = ident_chain(span);
    if segments.len() == 1
        && segments[0] == span
        && segments[0].starts_with(|c: char| c.is_ascii_uppercase())
        && segments[0].contains(|c: char| c.is_ascii_lowercase())
        && !EXTERNAL.contains(&span)
        && !repo.type_files.contains_key(span)
        && !repo.variants.contains(span)
    {
        report(
            span,
            format!("no type or variant {span} defined in the repository"),
        );
    }
    if segments.len() < 2 {
        return;
    }
    let first = segments[0].as_str();
    let segments: &[String] = if first == "crate" || first == "privpca" {
        &segments[1..]
    } else {
        &segments
    };
    if segments.is_empty() || EXTERNAL.contains(&segments[0].as_str()) {
        return;
    }
    if let Err(missing) = resolve(repo, segments) {
        report(span, missing);
    }
}

/// Resolves `a::b::c` against the repository, or says what is missing.
fn resolve(repo: &Repo, segments: &[String]) -> Result<(), String> {
    let first = &segments[0];
    if first.starts_with(|c: char| c.is_ascii_uppercase()) {
        let scope = repo.type_scope(first);
        if scope.is_empty() {
            return Err(format!("no type {first} defined in the repository"));
        }
        return members(&scope, first, &segments[1..]);
    }
    let candidates = repo.modules(first);
    if candidates.is_empty() {
        return Err(format!("no module {first} (no {first}.rs or {first}/)"));
    }
    let mut errors = Vec::new();
    for module in candidates {
        match resolve_in(repo, module, first, &segments[1..]) {
            Ok(()) => return Ok(()),
            Err(e) => errors.push(e),
        }
    }
    Err(errors.join("; or "))
}

fn resolve_in(repo: &Repo, module: Module, path: &str, rest: &[String]) -> Result<(), String> {
    let Some((next, after)) = rest.split_first() else {
        return Ok(());
    };
    if let Some(child) = repo.child(&module, next) {
        return resolve_in(repo, child, &format!("{path}::{next}"), after);
    }
    let scope = repo.scope(&module);
    if !scope.iter().any(|t| t.lines().any(|l| defines_item(l, next))) {
        let place = module.file.or(module.dir).unwrap_or_default();
        return Err(format!("{place} defines no item {next}"));
    }
    if after.is_empty() {
        return Ok(());
    }
    let scope = if next.starts_with(|c: char| c.is_ascii_uppercase()) {
        repo.type_scope(next)
    } else {
        scope
    };
    members(&scope, next, after)
}

fn members(scope: &[&str], owner: &str, rest: &[String]) -> Result<(), String> {
    let Some(member) = rest.first() else {
        return Ok(());
    };
    if scope.iter().any(|t| t.lines().any(|l| defines_member(l, member))) {
        Ok(())
    } else {
        Err(format!("no member {member} of {owner}"))
    }
}

/// The leading `ident::ident::…` chain of a span.
fn ident_chain(span: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut rest = span;
    loop {
        let ident: String = rest.chars().take_while(|&c| is_ident_char(c)).collect();
        if ident.is_empty() || ident.starts_with(|c: char| c.is_ascii_digit()) {
            break;
        }
        rest = &rest[ident.len()..];
        segments.push(ident);
        match rest.strip_prefix("::") {
            Some(after) => rest = after,
            None => break,
        }
    }
    segments
}

/// Backticked spans of a line.
fn backticked(line: &str) -> Vec<&str> {
    line.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s)
        .collect()
}

/// Paths from the repository root mentioned anywhere in a line.
fn root_paths(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    for root in ROOTS {
        for (at, _) in line.match_indices(root) {
            let before = line[..at].chars().next_back();
            if before.is_some_and(|c| is_ident_char(c) || "/.-<$~".contains(c)) {
                continue;
            }
            let token: String = line[at..]
                .chars()
                .take_while(|&c| is_ident_char(c) || "/.-*{},".contains(c))
                .collect();
            let token = token.trim_end_matches(['.', ',', '-']);
            let token = if token.contains('{') {
                token.to_string()
            } else {
                token.split(',').next().unwrap_or(token).to_string()
            };
            if token.len() > root.len() || !token.contains('{') {
                found.push(token);
            }
        }
    }
    found
}

/// Targets of Markdown links `[text](target)` in a line.
fn link_targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &line[at + 2..];
            rest.find(')').map(|end| &rest[..end])
        })
        .filter(|t| !t.contains(' '))
        .collect()
}

/// `docs/design/../k_dp_pca.md` → `docs/k_dp_pca.md`.
fn normalize(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::CurDir => {}
            other => parts.push(other.as_os_str().to_string_lossy().into_owned()),
        }
    }
    parts.join("/")
}

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
                "{doc}: `{citation}` is fixed: remove it from KNOWN_STALE in tests/docs.rs"
            ));
        }
    }
    assert!(
        report.is_empty(),
        "{} stale citation(s) in the docs (fix the doc, or the convention in tests/docs.rs):\n{}",
        report.len(),
        report.join("\n")
    );
}

/// Section citations `page.md §N.M` in `text` whose page has no heading numbered N.M, as
/// `(line, citation)`.
fn stale_sections(repo: &Repo, root: &Path, text: &str) -> Vec<(usize, String)> {
    let mut stale = Vec::new();
    for (index, line) in text.lines().enumerate() {
        for (at, _) in line.match_indices(".md") {
            let rest = line[at + 3..].trim_start_matches(['`', ',', ')']);
            let Some(section) = rest.strip_prefix(" §") else {
                continue;
            };
            let section: String = section
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let section = section.trim_end_matches('.');
            if section.is_empty() {
                continue;
            }
            let name: String = line[..at]
                .chars()
                .rev()
                .take_while(|&c| is_ident_char(c) || c == '-')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let citation = format!("{name}.md §{section}");
            let suffix = format!("/{name}.md");
            let Some(page) = repo
                .files
                .iter()
                .find(|f| f.starts_with("docs/") && f.ends_with(&suffix))
            else {
                stale.push((index + 1, format!("{citation}: no page {name}.md under docs/")));
                continue;
            };
            let page_text = std::fs::read_to_string(root.join(page)).expect("page");
            let found = page_text.lines().any(|l| {
                let heading = l.trim_start_matches('#');
                l.starts_with('#')
                    && (heading.starts_with(&format!(" {section} "))
                        || heading.starts_with(&format!(" {section}. ")))
            });
            if !found {
                stale.push((index + 1, format!("{citation}: {page} has no section {section}")));
            }
        }
    }
    stale
}

/// Code and docs cite design sections by number ("privacy.md §2.4"); each must exist.
#[test]
fn every_cited_section_exists() {
    let repo = Repo::load(root());
    let mut report = Vec::new();
    let mut texts: Vec<(String, String)> = repo
        .sources
        .iter()
        .filter(|(path, _)| path.as_str() != "tests/docs.rs")
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
Real: `src/privacy/target.rs`, `src/privacy/target.rs::within`, `privacy::target::within`,
`plan::describe`, `Cost::gaussian`, `PrivacyTarget`, `SeedNotAllowed`, `cost.rs`, `cargo bench --bench noise`, tests/readme.rs,
[noise](design/noise.md), `tokio::task::block_in_place`.
Made up: `src/privacy/made_up.rs`, `src/privacy/target.rs::no_such_fn`,
`privacy::target::no_such_fn`, `no_such_module::f`, `Cost::no_such_method`, `NoSuchType::f`, `NoSuchType`,
`made_up.rs`, `cargo bench --bench no_such_bench`, scripts/no-such.sh,
[gone](design/gone.md). Not ours, not checked: `diffprivlib/mechanisms/bingham.py`.
";
    let problems = check_doc(&repo, "docs/fake.md", fake);
    let cited: Vec<(usize, &str)> = problems.iter().map(|p| (p.line, p.citation.as_str())).collect();
    assert_eq!(
        cited,
        [
            (4, "src/privacy/made_up.rs"),
            (4, "src/privacy/target.rs::no_such_fn"),
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
    assert!(problems[0].missing.contains("src/privacy/made_up.rs"));
}
