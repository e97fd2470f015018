//! The README's walk-through is `scripts/walkthrough.sh` verbatim (which CI runs against a
//! freshly built binary), its "Per-site studies" section is `scripts/per-site-walkthrough.sh`
//! verbatim (which CI runs through `scripts/per-site-check.sh`), and its two commands are the
//! ones CI uses.

#[test]
fn readme_walkthrough_is_the_script_that_ci_runs() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README.md");
    let script = std::fs::read_to_string(format!("{root}/scripts/walkthrough.sh")).expect("walkthrough");
    let commands: Vec<&str> = script
        .lines()
        .skip_while(|l| !l.starts_with("# 1."))
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert!(commands.len() > 10, "the walk-through has its steps");
    for line in commands {
        assert!(
            readme.contains(line),
            "README is missing walk-through line: {line}"
        );
    }
    let ci = std::fs::read_to_string(format!("{root}/.ci/run")).expect(".ci/run");
    assert!(
        readme.contains("\ncargo test --locked "),
        "README gives the test command"
    );
    assert!(
        ci.contains("\ncargo test --locked\n"),
        "CI runs the README's test command"
    );
}

/// The README shows one sample output per walk-through command that prints JSON, each a valid
/// JSON document; `scripts/walkthrough-check.sh` (run by CI against the real service) checks
/// that the service prints them.
#[test]
fn readme_shows_one_output_per_printing_command() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README.md");
    let script = std::fs::read_to_string(format!("{root}/scripts/walkthrough.sh")).expect("walkthrough");
    let printing = script
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.contains("| jq '") || l.ends_with("| jq"))
        .count();
    let (_, after) = readme
        .split_once("\n<!-- walkthrough output -->\n")
        .expect("README marks the walk-through's output");
    let (outputs, _) = after
        .split_once("\n<!-- end walkthrough output -->\n")
        .expect("README marks the end of the walk-through's output");
    let blocks: Vec<&str> = outputs
        .split("```json\n")
        .skip(1)
        .map(|b| b.split("\n```").next().expect("closed block"))
        .collect();
    assert_eq!(blocks.len(), printing, "one sample output per printing command");
    for block in blocks {
        serde_json::from_str::<serde_json::Value>(block)
            .unwrap_or_else(|e| panic!("README sample output is not JSON ({e}):\n{block}"));
    }
}

/// The README's "Per-site studies" section is `scripts/per-site-walkthrough.sh` verbatim (CI runs
/// it through `scripts/per-site-check.sh` against a fresh service on a free port), and names the
/// binary the sites run instead of assuming `privpca` is on PATH.
#[test]
fn readme_per_site_section_is_the_script_that_ci_runs() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README.md");
    let script = std::fs::read_to_string(format!("{root}/scripts/per-site-walkthrough.sh"))
        .expect("per-site walkthrough");
    let commands: Vec<&str> = script
        .lines()
        .skip_while(|l| !l.starts_with("# 1."))
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert!(commands.len() > 10, "the per-site walk-through has its steps");
    for line in commands {
        assert!(
            readme.contains(line),
            "README is missing per-site walk-through line: {line}"
        );
    }
    let (_, section) = readme
        .split_once("\n## Per-site studies\n")
        .expect("README has a per-site studies section");
    let section = section.split("\n## ").next().expect("section");
    assert!(
        !section.lines().any(|l| l.starts_with("privpca site")),
        "the per-site section runs the binary by its path, not `privpca` from PATH"
    );
    let ci = std::fs::read_to_string(format!("{root}/.ci/run")).expect(".ci/run");
    assert!(
        ci.contains("scripts/per-site-check.sh"),
        "CI runs the README's per-site section"
    );
}
