//! `inbox-loadgen`: the load generator of docs/design.md#load-generator. It drives a running
//! `inventory-inbox run` consumer through Kafka and judges it from its
//! database, never from its own word.
//!
//! # Layout
//!
//! The modules are grouped by their role:
//!
//! ```text
//! commands  what each subcommand does, in order; the only layer that puts
//!           the others together
//! workload  what is done to the consumer: the event mix (pure), sent to
//!           Kafka paced or as a prefill, the lag spike, a chaos run's
//!           consumer processes
//! probes    I/O that reads the world: the database (which it also seeds),
//!           /metrics, the group's committed offsets
//! verdict   pure judgement: reconciliation, latency and its spike window,
//!           histogram quantiles; takes plain data, imports no other layer
//! output    the JSON reports, the terminal summary, the picture; the
//!           benchmark scripts' tables
//! ```
//!
//! Dependencies go one way: probes fill verdict's plain types, output
//! formats what verdict found, and nothing below `commands` imports it.
//!
//! One `run` goes: seed and snapshot the database ([`probes::database`]) ->
//! send the mix ([`workload::generate`], pure) paced or as a prefill, with
//! the lag spike ([`workload::produce`], [`workload::pause`]) over the
//! producer ([`workload::kafka`]) -> wait until the consumer drained and
//! compare what was sent with what the database shows
//! ([`commands::settle`], [`verdict::reconcile`], pure) -> latency from the
//! ledger rows ([`verdict::latency`], pure) and batch durations from the
//! consumer's `/metrics` ([`probes::scrape`], [`verdict::histogram`]) -> the
//! JSON report and summary ([`output::report`]) and the picture
//! ([`output::chart`]). The whole sequence is [`commands::run`]; `chaos`
//! ([`commands::chaos`], its faults in `commands::chaos::inject`, its
//! consumers in [`workload::fleet`], its recovery read from
//! [`probes::group_progress`], its table in [`output::chaos_report`]) and
//! `db-ceiling` ([`commands::db_ceiling`]) and `profile`
//! ([`commands::profile`]) reuse its parts. `table` ([`commands::table`])
//! runs nothing: it reads the reports a benchmark script's runs wrote and
//! prints their table ([`output::tables`]).

mod commands;
mod output;
mod probes;
mod verdict;
mod workload;

use std::process::ExitCode;

use anyhow::anyhow;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "inbox-loadgen",
    version,
    about = "Load generator of inventory-inbox: produce, drain, reconcile, report"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Produce one scenario against a running consumer, wait until it has
    /// drained, reconcile and report. Exits 1 when reconciliation fails.
    Run(commands::run::RunArgs),
    /// The database-only ceiling: the service's batch transaction driven
    /// directly, no Kafka; prints events/s (and writes --report).
    DbCeiling(commands::db_ceiling::CeilingArgs),
    /// Where the batch statement spends its time: batches applied under
    /// EXPLAIN ANALYZE at several sizes; prints a table of each step's time.
    Profile(commands::profile::ProfileArgs),
    /// Faults under load (consumer kills, a rebalance storm, database and
    /// broker restarts, a replay), each reconciled; prints a table. Exits 1
    /// when any scenario fails to reconcile.
    Chaos(commands::chaos::ChaosArgs),
    /// A fault schedule drawn from --seed played against the real system
    /// under load, then the database checked against the reference model fed
    /// with what the topic holds. Exits 1 when they differ.
    Explore(commands::explore::ExploreArgs),
    /// Deploys under load: a group of consumers rolled and scaled as a
    /// StatefulSet does it, per configuration (variants alternating), with
    /// a baseline; prints a table. Exits 1 when a phase fails to reconcile.
    Deploy(commands::deploy::DeployArgs),
    /// The table of a benchmark script (bench, network, lanes, scale,
    /// soak) from the reports its runs wrote: the figures gathered into one
    /// JSON file beside them and printed. Exits 1 when a run did not
    /// reconcile (soak: or a table's size did not level off).
    Table(commands::table::TableArgs),
}

/// The service binary's allocator, so that `db-ceiling` measures its batch
/// path.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let work = async {
        match Cli::parse().command {
            Command::Run(args) => commands::run::run(args).await,
            Command::DbCeiling(args) => commands::db_ceiling::db_ceiling(args).await,
            Command::Profile(args) => commands::profile::profile(args).await,
            Command::Chaos(args) => commands::chaos::chaos(args).await,
            Command::Explore(args) => commands::explore::explore(args).await,
            Command::Deploy(args) => commands::deploy::deploy(args).await,
            Command::Table(args) => commands::table::table(args),
        }
    };
    // Dropping the run on Ctrl-C drops a paused consumer's guard: SIGCONT.
    let outcome = tokio::select! {
        outcome = work => outcome,
        _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted")),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("inbox-loadgen: {error:#}");
            ExitCode::from(2)
        }
    }
}
