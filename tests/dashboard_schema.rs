//! `dashboards/inventory-inbox.json` parsed strictly by Grafana's own schema
//! (grafana-foundation-sdk, pinned in `tools/dashboard-check/go.mod`): no
//! unknown field, no wrong type, no missing required field in the dashboard,
//! its panels' options and field configs, or its queries; then validated.
//! The check is shown to fail on a dashboard with one misspelt field.
//! Needs Go (on the machine) and the Go module proxy for the SDK.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn dashboard_check(files: &[PathBuf]) -> Output {
    Command::new("go")
        .args(["run", "."])
        .args(files)
        .current_dir(repo().join("tools/dashboard-check"))
        .output()
        .expect("run `go run ./tools/dashboard-check` (Go must be installed)")
}

#[test]
fn the_dashboard_is_valid_by_grafanas_schema() {
    let dashboard = repo().join("dashboards/inventory-inbox.json");
    let output = dashboard_check(&[dashboard]);
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("27 panels, valid"));
}

#[test]
fn a_misspelt_panel_field_fails_the_check() {
    let text = std::fs::read_to_string(repo().join("dashboards/inventory-inbox.json"))
        .expect("read the dashboard");
    let mut dashboard: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let panel = &mut dashboard["panels"][1];
    let title = panel["title"].take();
    panel["titel"] = title;
    let broken = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("misspelt-dashboard.json");
    std::fs::write(&broken, dashboard.to_string()).expect("write the broken copy");
    let output = dashboard_check(&[broken]);
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the check accepted 'titel'");
    assert!(said.contains("titel"), "the error names the field: {said}");
}
