//! The image of `deploy/Containerfile`, built and run here by
//! `scripts/image-check.sh` (podman, buildah and runc from Debian's
//! packages; no registry is reachable, so the Debian base is made with
//! debootstrap and the build stage is replaced by the binary cargo built for
//! these tests): three `migrate` containers at once, then `run` as a
//! least-privilege login with a read-only root filesystem and no
//! capabilities, until `/healthz` answers; SIGTERM must end it with 0;
//! then the image is removed.
//! Needs root (rootful podman), as `make test` on CI has.

mod common;

use std::process::Command;

use common::*;

#[test]
fn the_image_starts_answers_healthz_and_stops_cleanly_on_sigterm() {
    require_services();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/image-check.sh");
    let output = Command::new(script)
        .arg(binary())
        .env("METRICS_PORT", free_port().to_string())
        .output()
        .expect("run scripts/image-check.sh");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{said}");
    for line in [
        "migrate 3: migrated",
        "/healthz: ok 200",
        "/readyz: ready 200",
        "SIGTERM: exit status 0",
    ] {
        assert!(said.contains(line), "{line:?} not in:\n{said}");
    }
    // Made again on every run, so none is kept: each would hold its layer.
    let kept = Command::new("podman")
        .args(["image", "exists", "localhost/inventory-inbox:check"])
        .status()
        .expect("run podman image exists");
    assert_eq!(
        kept.code(),
        Some(1),
        "the image outlived its check:\n{said}"
    );
}
