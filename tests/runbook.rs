//! Every alert of `dashboards/alerts.yml` has a `runbook_url` to its own
//! section of `docs/runbook.md`, and that section exists.

use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|error| panic!("read {path}: {error}"))
}

#[test]
fn every_alert_has_a_runbook_section() {
    let alerts = read("dashboards/alerts.yml");
    let runbook = read("docs/runbook.md");
    let names: Vec<&str> = alerts
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- alert: "))
        .collect();
    assert!(names.len() >= 8, "alerts found: {names:?}");
    for name in names {
        let url = format!("runbook_url: \"docs/runbook.md#{}\"", name.to_lowercase());
        assert!(alerts.contains(&url), "{name} has no {url}");
        assert!(
            runbook.lines().any(|line| line == format!("## {name}")),
            "docs/runbook.md has no section for {name}"
        );
    }
}
