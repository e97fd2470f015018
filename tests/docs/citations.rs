//! The checks on one document's text: paths, module paths and items, bench targets, links
//! and section numbers.

use std::path::Path;

use crate::repo::{Module, Repo, defines_item, defines_member, is_ident_char};

/// First segments of `a::b` citations, and backticked names, that name other crates, the
/// standard library, primitive types or non-Rust things, not this repository.
pub(crate) const EXTERNAL: &[&str] = &[
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

/// Directories a root-relative path may start with.
pub(crate) const ROOTS: &[&str] = &[
    "src/",
    "crates/",
    "tests/",
    "benches/",
    "scripts/",
    "migrations/",
    "examples/",
    "docs/",
];

/// File extensions that make a backticked word a file name to look up.
pub(crate) const FILE_EXTENSIONS: &[&str] = &[
    ".rs", ".sh", ".py", ".sql", ".md", ".toml", ".js", ".mjs", ".html", ".css",
];

/// One stale citation.
#[derive(Debug)]
pub(crate) struct Problem {
    pub(crate) line: usize,
    pub(crate) citation: String,
    pub(crate) missing: String,
}

/// Every stale citation in one document's text.
pub(crate) fn check_doc(repo: &Repo, doc_path: &str, text: &str) -> Vec<Problem> {
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
pub(crate) fn check_span(repo: &Repo, span: &str, report: &mut impl FnMut(&str, String)) {
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
pub(crate) fn resolve(repo: &Repo, segments: &[String]) -> Result<(), String> {
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

pub(crate) fn resolve_in(repo: &Repo, module: Module, path: &str, rest: &[String]) -> Result<(), String> {
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

pub(crate) fn members(scope: &[&str], owner: &str, rest: &[String]) -> Result<(), String> {
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
pub(crate) fn ident_chain(span: &str) -> Vec<String> {
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
pub(crate) fn backticked(line: &str) -> Vec<&str> {
    line.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s)
        .collect()
}

/// Paths from the repository root mentioned anywhere in a line.
pub(crate) fn root_paths(line: &str) -> Vec<String> {
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
pub(crate) fn link_targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &line[at + 2..];
            rest.find(')').map(|end| &rest[..end])
        })
        .filter(|t| !t.contains(' '))
        .collect()
}

/// `docs/design/../k_dp_pca.md` → `docs/k_dp_pca.md`.
pub(crate) fn normalize(path: &Path) -> String {
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

/// Section citations `page.md §N.M` in `text` whose page has no heading numbered N.M, as
/// `(line, citation)`.
pub(crate) fn stale_sections(repo: &Repo, root: &Path, text: &str) -> Vec<(usize, String)> {
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
