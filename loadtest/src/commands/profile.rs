//! Where the batch statement spends its time (`inbox-loadgen profile`,
//! docs/benchmarks.md): batches of fresh events of the `db-ceiling` mix,
//! each applied under `EXPLAIN (ANALYZE, BUFFERS)` ([`Inbox::explain`]), at
//! several batch sizes; per size, the mean planning and execution time and
//! the mean time of each step of the batch function (`inbox_apply_batch`,
//! migrations/20261206000008), as the function times them when asked
//! (`inbox.step_times`).
//!
//! The plans are the ones the service runs: prepared once, generic (the
//! same plan for every batch), unless --custom-plans. The times are those
//! of executing them, with the clock reads of ANALYZE and of the steps'
//! marks added.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use chrono::Utc;
use clap::Args;
use inventory_inbox::store::{self, Inbox};
use serde_json::Value;

use crate::commands::db_ceiling::{fresh_records, SkuMix};
use crate::probes::database::Database;

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// A migrated database (its password is never printed).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
    /// Ledger consumer name to write under.
    #[arg(long, default_value = "profile")]
    consumer_name: String,
    /// Batch sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100")]
    sizes: Vec<usize>,
    /// Batches measured per size, after --warmup batches that are not.
    #[arg(long, default_value_t = 40)]
    batches: usize,
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    #[command(flatten)]
    skus: SkuMix,
    /// Where to write the table as JSON.
    #[arg(long, value_name = "FILE.json")]
    report: Option<PathBuf>,
    /// Plan each batch for its values (a custom plan) instead of running
    /// the one prepared plan the service runs (a generic plan).
    #[arg(long)]
    custom_plans: bool,
    /// Where to write the last plan of the last size, as EXPLAIN's JSON.
    #[arg(long, value_name = "FILE.json")]
    plan: Option<PathBuf>,
}

/// The mean times of one batch size, in milliseconds.
#[derive(Debug, Default)]
struct Profile {
    planning: f64,
    execution: f64,
    /// Execution outside the plan's nodes: starting the executor (every
    /// partition of the window opened and locked) and ending it.
    start_and_end: f64,
    /// Each step's own time, by name, in the statement's order.
    steps: Vec<(String, f64)>,
}

pub async fn profile(args: ProfileArgs) -> Result<bool> {
    if args.sizes.is_empty() || args.sizes.contains(&0) || args.batches == 0 {
        return Err(anyhow!("--sizes must be positive and --batches at least 1"));
    }
    let mix = args.skus.fresh()?;
    let today = Utc::now().date_naive();
    let database = Database::connect(
        &args.database_url,
        &args.consumer_name,
        "profile",
        (today, today),
    )
    .await?;
    database.seed(&mix.sku_names()).await?;
    let connection = store::Connection {
        url: &args.database_url,
        statement_timeout: std::time::Duration::from_secs(30),
        lock_timeout: std::time::Duration::from_secs(5),
        pooler: store::Pooler::None,
    };
    let pool = store::connect(connection, 1)
        .await
        .context("connecting to DATABASE_URL")?;
    let inbox = Inbox::new(pool, args.consumer_name.clone());

    let mut profiles = Vec::new();
    for &size in &args.sizes {
        let count = ((args.warmup + args.batches) * size) as u64;
        let records = fresh_records(mix.clone(), count, &format!("profile-{size}"));
        let mut plans = Vec::new();
        for (n, batch) in records.chunks(size).enumerate() {
            let plan = inbox
                .explain(batch, !args.custom_plans)
                .await
                .context("explaining a batch")?;
            if n >= args.warmup {
                plans.push(plan);
            }
        }
        profiles.push((size, mean_profile(&plans)?));
        if let (Some(path), Some(last)) = (&args.plan, plans.last()) {
            std::fs::write(path, serde_json::to_vec_pretty(last)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    print_table(&profiles);
    if let Some(path) = &args.report {
        let json: Vec<Value> = profiles
            .iter()
            .map(|(size, p)| {
                serde_json::json!({
                    "batch_size": size,
                    "planning_ms": p.planning,
                    "execution_ms": p.execution,
                    "start_and_end_ms": p.start_and_end,
                    "steps_ms": p.steps.iter().map(|(name, ms)| (name.clone(), Value::from(*ms)))
                        .collect::<serde_json::Map<String, Value>>(),
                })
            })
            .collect();
        std::fs::write(path, serde_json::to_vec_pretty(&json)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(true)
}

/// The mean over `plans` (EXPLAIN's JSON, one per batch).
fn mean_profile(plans: &[Value]) -> Result<Profile> {
    let mut sum = Profile::default();
    let mut steps: BTreeMap<String, (usize, f64)> = BTreeMap::new();
    for explained in plans {
        let top = explained
            .get(0)
            .ok_or_else(|| anyhow!("EXPLAIN returned no plan"))?;
        sum.planning += number(top, "Planning Time");
        sum.execution += number(top, "Execution Time");
        let plan = &top["Plan"];
        sum.start_and_end += (number(top, "Execution Time") - inclusive(plan)).max(0.0);
        for (order, (name, own)) in own_times(top).into_iter().enumerate() {
            let entry = steps.entry(name).or_insert((order, 0.0));
            entry.1 += own;
        }
    }
    let count = plans.len() as f64;
    let mut ordered: Vec<(usize, String, f64)> = steps
        .into_iter()
        .map(|(name, (order, total))| (order, name, total / count))
        .collect();
    ordered.sort_by_key(|(order, _, _)| *order);
    Ok(Profile {
        planning: sum.planning / count,
        execution: sum.execution / count,
        start_and_end: sum.start_and_end / count,
        steps: ordered
            .into_iter()
            .map(|(_, name, ms)| (name, ms))
            .collect(),
    })
}

/// Each step's time in one batch, in the order the batch function ran
/// them (the `Steps` it timed: `[name, ms]` pairs).
fn own_times(explained: &Value) -> Vec<(String, f64)> {
    explained["Steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|step| Some((step[0].as_str()?.to_owned(), step[1].as_f64()?)))
        .collect()
}

/// A node's total time over all its loops, in milliseconds.
fn inclusive(node: &Value) -> f64 {
    number(node, "Actual Total Time") * number(node, "Actual Loops").max(1.0)
}

fn number(value: &Value, key: &str) -> f64 {
    value.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// One row per step, one column per batch size, milliseconds per batch.
fn print_table(profiles: &[(usize, Profile)]) {
    let header: Vec<String> = profiles
        .iter()
        .map(|(size, _)| format!("batch of {size}"))
        .collect();
    println!("| ms per batch | {} |", header.join(" | "));
    println!("|---|{}", "---:|".repeat(profiles.len()));
    let row = |label: &str, value: &dyn Fn(&Profile) -> f64| {
        let cells: Vec<String> = profiles
            .iter()
            .map(|(_, p)| format!("{:.3}", value(p)))
            .collect();
        println!("| {label} | {} |", cells.join(" | "));
    };
    row("planning", &|p| p.planning);
    row("execution", &|p| p.execution);
    row("executor start and end", &|p| p.start_and_end);
    let names: Vec<String> = profiles
        .last()
        .map(|(_, p)| p.steps.iter().map(|(name, _)| name.clone()).collect())
        .unwrap_or_default();
    for name in names {
        row(&format!("`{name}`"), &|p| {
            p.steps
                .iter()
                .find(|(step, _)| *step == name)
                .map_or(0.0, |(_, ms)| *ms)
        });
    }
}
