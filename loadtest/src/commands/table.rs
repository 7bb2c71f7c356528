//! `inbox-loadgen table`: the tables of the benchmark scripts, made from
//! the reports their runs wrote ([`crate::output::tables`]): reads the
//! folder, writes the gathered JSON beside it, prints the table. Exits 1
//! when the table's verdict fails (a run not reconciled; for `soak`, also
//! a size that did not level off; for `explore`, a seed not `ok`).

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::output::tables::{self, Table};
use crate::output::write_json;

#[derive(Debug, Args)]
pub struct TableArgs {
    #[command(subcommand)]
    kind: Kind,
}

#[derive(Debug, Subcommand)]
enum Kind {
    /// `make bench`: the six reports in OUT into OUT/results.json, beside
    /// the must and aim of docs/design.md#numbers.
    Bench {
        /// The folder of steady.json, lag_spike.json, max_batch.json,
        /// max_per_record.json, db_ceiling.json and floor.json.
        out: PathBuf,
    },
    /// `make bench-network`: loopback and each RTT's steady, max and
    /// backlog runs in OUT into OUT/../network.json, with the checks.
    Network {
        /// The folder of {loopback,rttN}_{steady,max,backlog}.json.
        out: PathBuf,
        /// The RTTs in ms (a space-separated list is split).
        rtts: Vec<String>,
    },
    /// `scripts/bench-network.sh --sweep`: max and steady per pool size at
    /// 0, 2 and 10 ms RTT in OUT into OUT/../lanes.json.
    Lanes {
        /// The folder of lanesN_rttR_{max,steady}.json.
        out: PathBuf,
        /// The pool sizes (a space-separated list is split).
        lanes: Vec<String>,
    },
    /// `make bench-scale`: each round's empty and history runs and storage
    /// snapshots in OUT into OUT/scale.json, as a Markdown table.
    Scale {
        out: PathBuf,
        /// The events of history the history database holds.
        history_events: i64,
        rounds: usize,
    },
    /// `make explore`: one row per seed from OUT/SEED/{result.txt,
    /// report.json} into OUT/explore.json, as a Markdown table.
    Explore {
        out: PathBuf,
        /// Each seed's seconds of load, its rate and the brokers, for the
        /// table's first line.
        #[arg(long)]
        seconds: u64,
        #[arg(long)]
        rate: u64,
        #[arg(long)]
        brokers: u64,
        /// The seeds, in the order run (a space-separated list is split).
        seeds: Vec<String>,
    },
    /// `make bench-ceiling`'s floor: pgbench's OUT/floor.pgbench.txt into
    /// OUT/floor.json, beside OUT/db_ceiling.json.
    Floor {
        out: PathBuf,
        /// The floor's transactions (batches of 100).
        batches: u64,
    },
    /// `make soak`: samples.txt, maintain.log and day_N.json in OUT into
    /// OUT/soak.json, as two Markdown tables.
    Soak {
        out: PathBuf,
        days: i64,
        day_seconds: i64,
    },
}

/// Lists given as one argument or several.
fn words(list: &[String]) -> Vec<String> {
    list.iter()
        .flat_map(|item| item.split_whitespace())
        .map(str::to_owned)
        .collect()
}

/// The folder beside `out`, where the network tables go.
fn beside(out: &Path) -> PathBuf {
    out.parent().map(Path::to_path_buf).unwrap_or_default()
}

pub fn table(args: TableArgs) -> Result<bool> {
    // The table and where its JSON goes.
    let (table, json_path): (Table, PathBuf) = match args.kind {
        Kind::Bench { out } => {
            let path = out.join("results.json");
            (
                tables::bench::table(&out, &path.display().to_string())?,
                path,
            )
        }
        Kind::Network { out, rtts } => {
            let path = beside(&out).join("network.json");
            let table = tables::network::table(&out, &words(&rtts), &path.display().to_string())?;
            (table, path)
        }
        Kind::Lanes { out, lanes } => {
            let path = beside(&out).join("lanes.json");
            let table = tables::network::lanes(&out, &words(&lanes), &path.display().to_string())?;
            (table, path)
        }
        Kind::Scale {
            out,
            history_events,
            rounds,
        } => {
            let table = tables::scale::table(&out, history_events, rounds)?;
            (table, out.join("scale.json"))
        }
        Kind::Explore {
            out,
            seconds,
            rate,
            brokers,
            seeds,
        } => {
            let run = tables::explore::Run {
                date: chrono::Utc::now().format("%Y-%m-%d").to_string(),
                seconds,
                rate,
                brokers,
            };
            let seeds: Vec<(String, PathBuf)> = words(&seeds)
                .into_iter()
                .map(|seed| {
                    let folder = out.join(&seed);
                    (seed, folder)
                })
                .collect();
            (
                tables::explore::table(&run, &seeds)?,
                out.join("explore.json"),
            )
        }
        Kind::Floor { out, batches } => {
            (tables::floor::table(&out, batches)?, out.join("floor.json"))
        }
        Kind::Soak {
            out,
            days,
            day_seconds,
        } => {
            let table = tables::soak::table(&out, days, day_seconds)?;
            (table, out.join("soak.json"))
        }
    };
    write_json(&json_path, &table.json)?;
    print!("{}", table.text);
    Ok(table.ok)
}
