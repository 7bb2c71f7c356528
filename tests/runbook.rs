//! Every alert of `dashboards/alerts.yml` has a `runbook_url` to its own
//! section of `docs/runbook.md`, and that section exists; the alert table
//! and the panel list of `docs/observability.md` name every alert (with its
//! severity) and every panel of `dashboards/`, and nothing else, so that
//! the docs cannot drift from them again.

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

/// The rows of the markdown table under `heading` in `text`: its cells,
/// trimmed, header and separator left out.
fn table_under<'a>(text: &'a str, heading: &str) -> Vec<Vec<&'a str>> {
    let section = text
        .split_once(heading)
        .unwrap_or_else(|| panic!("no {heading}"))
        .1;
    section
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2)
        .map(|line| line.trim_matches('|').split('|').map(str::trim).collect())
        .collect()
}

#[test]
fn the_alert_table_of_the_docs_lists_every_alert_and_its_severity() {
    let alerts = read("dashboards/alerts.yml");
    let mut rules: Vec<(String, String)> = Vec::new();
    let mut name = None;
    for line in alerts.lines().map(str::trim) {
        if let Some(alert) = line.strip_prefix("- alert: ") {
            name = Some(alert.to_owned());
        } else if let (Some(severity), Some(alert)) = (line.strip_prefix("severity: "), &name) {
            rules.push((alert.clone(), severity.to_owned()));
            name = None;
        }
    }
    let mut documented: Vec<(String, String)> =
        table_under(&read("docs/observability.md"), "## Alerts")
            .into_iter()
            .map(|row| (row[0].trim_matches('`').to_owned(), row[2].to_owned()))
            .collect();
    rules.sort();
    documented.sort();
    assert!(rules.len() >= 10, "alerts found: {rules:?}");
    assert_eq!(
        documented, rules,
        "docs/observability.md against dashboards/alerts.yml"
    );
}

#[test]
fn the_panel_list_of_the_docs_names_every_panel() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("dashboards/inventory-inbox.json")).expect("the dashboard");
    let docs = read("docs/observability.md");
    let (_, list) = docs.split_once("## The panels").expect("## The panels");
    let list = list.split("\n## ").next().unwrap_or_default();
    let mut titles = Vec::new();
    let mut panels: Vec<&serde_json::Value> =
        dashboard["panels"].as_array().unwrap().iter().collect();
    while let Some(panel) = panels.pop() {
        if let Some(inner) = panel["panels"].as_array() {
            panels.extend(inner);
        }
        if panel["type"] != "row" {
            titles.push(panel["title"].as_str().expect("a panel's title").to_owned());
        }
    }
    assert!(titles.len() >= 20, "panels found: {titles:?}");
    let missing: Vec<&String> = titles
        .iter()
        .filter(|title| !list.contains(&format!("**{title}**")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/observability.md names no panel {missing:?}"
    );
    let named = list.matches("**").count() / 2;
    assert_eq!(
        named,
        titles.len(),
        "a panel named in the docs that the dashboard lacks"
    );
}

#[test]
fn the_pull_request_template_asks_every_item_of_the_review_checklist() {
    let checklist = read("docs/review-checklist.md");
    let template = read(".github/pull_request_template.md");
    let items: Vec<&str> = checklist
        .lines()
        .filter_map(|line| line.strip_prefix("## "))
        .collect();
    let asked: Vec<&str> = template
        .lines()
        .filter_map(|line| line.strip_prefix("- [ ] "))
        .collect();
    assert!(items.len() >= 8, "items found: {items:?}");
    assert_eq!(
        asked, items,
        ".github/pull_request_template.md against the checklist"
    );
}
