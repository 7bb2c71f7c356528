//! The `inventory-inbox` binary: parses the command line and dispatches.

mod commands;

use std::process::ExitCode;

use clap::Parser;
use inventory_inbox::config::{self, Cli, Command};
use inventory_inbox::service;
use inventory_inbox::telemetry::Telemetry;

/// mimalloc: with glibc's malloc about a third of the batch path's CPU
/// went to malloc and free (docs/benchmarks/2026-12-06.md#the-allocator).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if !error.use_stderr() => error.exit(),
        Err(error) => {
            eprintln!("{}", config::one_line(&error));
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, not in files or collectors.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let names = std::env::vars_os().map(|(name, _)| name.to_string_lossy().into_owned());
    for misspelled in config::misspelled_variables(names) {
        tracing::warn!("{misspelled}");
    }
    // Tracing is set up before the runtime: its exporter's HTTP client
    // blocks on a thread of its own.
    let (telemetry, tracing_guard) = match &cli.command {
        Command::Run(_) => match Telemetry::from_env(|name| std::env::var(name).ok()) {
            Ok(tracing) => tracing,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(2);
            }
        },
        _ => Telemetry::off_with_guard(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(dispatch(cli.command, telemetry));
    drop(runtime);
    tracing_guard.shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(command: Command, telemetry: Telemetry) -> anyhow::Result<()> {
    match command {
        Command::Run(args) => service::run(args, telemetry).await?,
        Command::Migrate(args) => commands::migrate::run(args).await?,
        Command::Maintain(args) => commands::maintain::run(args).await?,
        Command::Parked { command } => commands::parked::run(command).await?,
        Command::Positions { command } => commands::positions::run(command).await?,
        Command::Inspect(args) => commands::inspect::run(args).await?,
        Command::Breaker { command } => commands::breaker::run(command).await?,
        Command::Console(args) => inventory_inbox::console::run(args).await?,
    }
    Ok(())
}
