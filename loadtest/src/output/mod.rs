//! What a person gets from a run: the JSON report of docs/design.md#load-generator with a summary
//! on the terminal and the picture beside the report; for a chaos run, its
//! table and JSON report; for a deploy run, the same; the tables of the
//! benchmark scripts, made from their runs' reports.

pub mod chaos_report;
pub mod chart;
pub mod deploy_report;
pub mod report;
pub mod tables;

use std::path::Path;

use anyhow::{Context, Result};

/// Writes a JSON report (pretty, one trailing newline), creating its folder.
pub fn write_json(path: &Path, json: &serde_json::Value) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, serde_json::to_string_pretty(json)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}
