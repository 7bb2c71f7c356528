//! The shell commands a run injects its faults with (restart PostgreSQL,
//! kill a broker, …): given by the caller, run as they are.

use anyhow::{bail, Context, Result};

/// Runs a shell command; fails with its output when it fails.
pub async fn shell(command: Option<&str>) -> Result<()> {
    let command = command.context("no command given")?;
    let output = tokio::process::Command::new("sh")
        .args(["-c", command])
        .output()
        .await
        .with_context(|| format!("running {command:?}"))?;
    if !output.status.success() {
        bail!(
            "{command:?} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}
