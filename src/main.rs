//! The `inventory-inbox` binary: parses the command line and dispatches.

use std::process::ExitCode;

use clap::Parser;
use inventory_inbox::config::{self, Cli, Command};
use inventory_inbox::{service, store};

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
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(dispatch(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Run(args) => service::run(args).await?,
        Command::Migrate(args) => {
            args.validate()?;
            let pool = store::connect(&args.database_url, 1).await?;
            let report = store::migrate(&pool, args.inbox_retention_days).await?;
            println!(
                "migrated; ledger partitions created: {}, dropped: {}",
                report.created, report.dropped
            );
        }
        Command::Maintain(args) => {
            args.validate()?;
            let pool = store::connect(&args.database_url, 1).await?;
            let report = store::maintain(&pool, args.inbox_retention_days).await?;
            if report.locked {
                println!(
                    "maintained; ledger partitions created: {}, dropped: {}",
                    report.created, report.dropped
                );
            } else {
                println!("another instance holds the maintenance lock; nothing done");
            }
        }
    }
    Ok(())
}
