//! The README's walk-through is `scripts/walkthrough.sh` verbatim (which CI runs against a
//! freshly built binary), and its two commands are the ones CI uses.

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
