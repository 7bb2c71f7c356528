//! The Kubernetes manifests of `deploy/` validated offline by
//! `scripts/deploy-check.sh`: rendered by kustomize (pinned), every built-in
//! kind checked strictly by kubernetes-validate against the schemas of
//! Kubernetes 1.31 and 1.37, the PodMonitor against prometheus-operator's
//! CRD, and the selectors, port names and config references resolved. The
//! check is shown to fail on a copy of the base with one misspelt field, in a
//! built-in kind and in the custom resource, and with a selector that
//! matches nothing. Needs Go and Python 3 (on the machine); the first run
//! installs the tools into `.local/` from the Go module proxy and PyPI.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn deploy_check(kustomizations: &[PathBuf]) -> Output {
    Command::new(repo().join("scripts/deploy-check.sh"))
        .args(kustomizations)
        .output()
        .expect("run scripts/deploy-check.sh")
}

fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A copy of `deploy/base` with `from` replaced by `to` in `file` (once,
/// and it must be there).
fn broken_base(name: &str, file: &str, from: &str, to: &str) -> PathBuf {
    let copy = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("deploy-{name}"));
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(&copy).expect("create the copy's folder");
    for entry in std::fs::read_dir(repo().join("deploy/base")).expect("read deploy/base") {
        let entry = entry.expect("an entry of deploy/base");
        std::fs::copy(entry.path(), copy.join(entry.file_name())).expect("copy a manifest");
    }
    let path = copy.join(file);
    let text = std::fs::read_to_string(&path).expect("read the manifest");
    assert_eq!(text.matches(from).count(), 1, "{from:?} once in {file}");
    std::fs::write(&path, text.replace(from, to)).expect("write the broken manifest");
    copy
}

#[test]
fn the_manifests_are_valid_kubernetes_and_prometheus_operator_objects() {
    let output = deploy_check(&[]);
    let said = said(&output);
    assert!(output.status.success(), "{said}");
    assert!(
        said.contains("deploy-check: ok: 2 kustomizations, 11 documents valid"),
        "{said}"
    );
    assert!(
        said.contains("PodMonitor/inventory-inbox (monitoring.coreos.com/v1) passed against its CRD's schema, strictly"),
        "{said}"
    );
}

#[test]
fn a_misspelt_field_of_the_statefulset_fails_the_check() {
    let base = broken_base(
        "misspelt-statefulset",
        "statefulset.yaml",
        "readinessProbe:",
        "readinesProbe:",
    );
    let output = deploy_check(&[base]);
    let said = said(&output);
    assert!(
        !output.status.success(),
        "the check accepted 'readinesProbe'"
    );
    assert!(
        said.contains("'readinesProbe' was unexpected"),
        "the error names the field: {said}"
    );
}

#[test]
fn a_misspelt_field_of_the_podmonitor_fails_the_check() {
    let base = broken_base(
        "misspelt-podmonitor",
        "podmonitor.yaml",
        "podMetricsEndpoints:",
        "podMetricEndpoints:",
    );
    let output = deploy_check(&[base]);
    let said = said(&output);
    assert!(
        !output.status.success(),
        "the check accepted 'podMetricEndpoints'"
    );
    assert!(
        said.contains("'podMetricEndpoints' was unexpected"),
        "the error names the field: {said}"
    );
}

#[test]
fn a_podmonitor_that_selects_no_pod_fails_the_check() {
    let base = broken_base(
        "podmonitor-selects-nothing",
        "podmonitor.yaml",
        "  selector:\n    matchLabels:\n      app.kubernetes.io/name: inventory-inbox",
        "  selector:\n    matchLabels:\n      app.kubernetes.io/name: inventory-inbx",
    );
    let output = deploy_check(&[base]);
    let said = said(&output);
    assert!(!output.status.success(), "the check accepted the selector");
    assert!(said.contains("matches no pod template"), "{said}");
}
