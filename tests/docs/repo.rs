//! The repository as the citation checks see it: its files and directories, the Rust
//! sources' text, where each type is defined, and the module tree.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

/// The repository's files and the Rust sources' text.
pub(crate) struct Repo {
    pub(crate) files: BTreeSet<String>,
    pub(crate) dirs: BTreeSet<String>,
    /// Last components of every directory (`privacy`, `api`, …).
    pub(crate) dir_names: BTreeSet<String>,
    /// Directories that hold Rust code, directly or below.
    pub(crate) code_dirs: BTreeSet<String>,
    pub(crate) sources: HashMap<String, String>,
    /// For each type name, the files that define, implement or re-export it.
    pub(crate) type_files: HashMap<String, BTreeSet<String>>,
    /// Names that begin a line as an enum variant or a field does (`Name,`, `Name(`, `Name {`).
    pub(crate) variants: BTreeSet<String>,
    pub(crate) targets: BTreeSet<String>,
}

impl Repo {
    pub(crate) fn load(root: &Path) -> Repo {
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
            "crates",
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
    pub(crate) fn index(&mut self) {
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

    pub(crate) fn walk(&mut self, root: &Path, rel: &str) {
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

    pub(crate) fn exists(&self, path: &str) -> bool {
        let path = path.trim_end_matches('/');
        self.files.contains(path) || self.dirs.contains(path)
    }

    /// Whether a file name or a relative path (`cost.rs`, `algorithms/auto.rs`) is the end of
    /// some repository path.
    pub(crate) fn has_file_ending(&self, name: &str) -> bool {
        let suffix = format!("/{name}");
        self.files.iter().any(|f| f == name || f.ends_with(&suffix))
    }

    /// The modules named `name`: `(file, directory)` for every `name.rs` or `name/` holding
    /// Rust code.
    pub(crate) fn modules(&self, name: &str) -> Vec<Module> {
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

    pub(crate) fn child(&self, module: &Module, name: &str) -> Option<Module> {
        let dir = module.dir.as_ref()?;
        let file = format!("{dir}/{name}.rs");
        let sub = format!("{dir}/{name}");
        let file = self.sources.contains_key(&file).then_some(file);
        let sub = self.dirs.contains(&sub).then_some(sub);
        (file.is_some() || sub.is_some()).then_some(Module { file, dir: sub })
    }

    /// The text of a module: its file and every Rust file under its directory (so items a
    /// `mod.rs` re-exports from a child count).
    pub(crate) fn scope(&self, module: &Module) -> Vec<&str> {
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
    pub(crate) fn type_scope(&self, name: &str) -> Vec<&str> {
        self.type_files
            .get(name)
            .into_iter()
            .flatten()
            .map(|path| self.sources[path].as_str())
            .collect()
    }
}

pub(crate) struct Module {
    pub(crate) file: Option<String>,
    pub(crate) dir: Option<String>,
}

pub(crate) fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `word` occurs in `line` right after `keyword ` and followed by a non-identifier
/// character.
pub(crate) fn after_keyword(line: &str, keyword: &str, word: &str) -> bool {
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

pub(crate) fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        before.is_none_or(|c| !is_ident_char(c)) && after.is_none_or(|c| !is_ident_char(c))
    })
}

/// Whether a line defines `name` as an item (function, type, constant, module, macro) or
/// re-exports it.
pub(crate) fn defines_item(line: &str, name: &str) -> bool {
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
pub(crate) fn defines_member(line: &str, name: &str) -> bool {
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
