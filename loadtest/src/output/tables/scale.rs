//! `make bench-scale` (scripts/bench-scale.sh): the empty and the history
//! figures side by side with the must/aim of SPEC §14
//! (docs/design.md#storage), into scale.json. Each round ran the empty
//! database and then the history: a figure is the mean of the rounds, a
//! ratio the mean of the rounds' ratios, each round's given too. No
//! verdict: the table is read by a person (the must is printed beside it).

use std::collections::BTreeMap;

use anyhow::{anyhow, Context, Result};
use serde_json::{json, Map, Value};

use super::{fixed, general, grouped, grouped_int, number, reconciled, Files, Table};

/// One table's line of loadtest/sql/storage_snapshot.sql.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Size {
    pub heap: i64,
    pub index: i64,
    pub rows: i64,
    pub autovacuums: i64,
    pub autoanalyzes: i64,
}

/// A snapshot file: `name heap index rows autovacuums autoanalyzes` per
/// line, `wal` among the names (its position as the heap).
pub fn snapshot(name: &str, text: &str) -> Result<BTreeMap<String, Size>> {
    let mut tables = BTreeMap::new();
    for line in text.split('\n').filter(|line| !line.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [table, numbers @ ..] = fields.as_slice() else {
            unreachable!("a line that is not blank has a field");
        };
        let numbers = numbers
            .iter()
            .map(|n| n.parse::<i64>())
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("{name}: {line:?}"))?;
        let [heap, index, rows, autovacuums, autoanalyzes] = numbers[..] else {
            return Err(anyhow!("{name}: {line:?} is not six fields"));
        };
        tables.insert(
            (*table).to_owned(),
            Size {
                heap,
                index,
                rows,
                autovacuums,
                autoanalyzes,
            },
        );
    }
    Ok(tables)
}

/// The figures of one database in one round (`scale_{size}_*`).
fn size_figures(files: &dyn Files, size: &str) -> Result<Map<String, Value>> {
    let [steady_file, max_file, ceiling_file] =
        ["steady", "max", "ceiling"].map(|run| format!("scale_{size}_{run}.json"));
    let steady = files.json(&steady_file)?;
    let most = files.json(&max_file)?;
    let ceiling = files.json(&ceiling_file)?;
    let snap = |when: &str| {
        let name = format!("scale_{size}_{when}.txt");
        snapshot(&name, &files.required(&name)?)
    };
    let (before, after) = (snap("before")?, snap("after")?);
    let table = |snapshot: &BTreeMap<String, Size>, which: &str, table: &str| {
        snapshot
            .get(table)
            .copied()
            .ok_or_else(|| anyhow!("scale_{size}_{which}.txt: no line for {table}"))
    };
    let pair = |name: &str| -> Result<(Size, Size)> {
        Ok((
            table(&before, "before", name)?,
            table(&after, "after", name)?,
        ))
    };
    let grew = |name: &str| -> Result<i64> {
        let (b, a) = pair(name)?;
        Ok((a.heap + a.index) - (b.heap + b.index))
    };
    let events = number(&ceiling, &ceiling_file, &["events"])?;
    let ceiling_eps = number(&ceiling, &ceiling_file, &["events_per_second"])?;
    let ledger = pair("processed_inbox")?.1;
    let (reservations_before, reservations) = pair("order_reservation")?;
    let (wal_before, wal) = pair("wal")?;
    let new_lines = reservations.rows - reservations_before.rows;
    let (mut autovacuums, mut autoanalyzes) = (0, 0);
    for (name, a) in after.iter().filter(|(name, _)| name.as_str() != "wal") {
        let b = table(&before, "before", name)?;
        autovacuums += a.autovacuums - b.autovacuums;
        autoanalyzes += a.autoanalyzes - b.autoanalyzes;
    }
    // A figure is averaged over the rounds: a run without it stops the
    // table here, naming it (the Python script's sum stopped on it too).
    for (report, name, path) in [
        (&steady, &steady_file, &["e2e_latency_ms", "p50"][..]),
        (&steady, &steady_file, &["e2e_latency_ms", "p95"]),
        (&steady, &steady_file, &["e2e_latency_ms", "p99"]),
        (&steady, &steady_file, &["batch_duration_ms", "p95"]),
        (&most, &max_file, &["throughput_eps"]),
    ] {
        number(report, name, path)?;
    }
    let figures = json!({
        "steady_e2e_p50_ms": steady["e2e_latency_ms"]["p50"],
        "steady_e2e_p95_ms": steady["e2e_latency_ms"]["p95"],
        "steady_e2e_p99_ms": steady["e2e_latency_ms"]["p99"],
        "steady_batch_p95_ms": steady["batch_duration_ms"]["p95"],
        "max_throughput_eps": most["throughput_eps"],
        "db_only_ceiling_eps": ceiling["events_per_second"],
        "statement_ms_per_100_events": 100_000.0 / ceiling_eps,
        "ledger_bytes_per_event": grew("processed_inbox")? as f64 / events,
        "reservation_bytes_per_line": grew("order_reservation")? as f64 / new_lines.max(1) as f64,
        "wal_bytes_per_event": (wal.heap - wal_before.heap) as f64 / events,
        // What the tables hold for each of their rows, every day of them:
        // on the history, mostly closed days, compacted as maintenance
        // does; the ceiling's figures above are those of a young day being
        // written, whose key of random ids is not yet as full as it gets.
        "ledger_table_bytes_per_event": (ledger.heap + ledger.index) as f64
            / ledger.rows.max(1) as f64,
        "reservation_table_bytes_per_line": (reservations.heap + reservations.index) as f64
            / reservations.rows.max(1) as f64,
        "ledger_rows": ledger.rows,
        "reservation_rows": reservations.rows,
        "ledger_index_bytes": ledger.index,
        "reservation_index_bytes": reservations.index,
        "ledger_heap_bytes": ledger.heap,
        "reservation_heap_bytes": reservations.heap,
        "autovacuums_during_ceiling": autovacuums,
        "autoanalyzes_during_ceiling": autoanalyzes,
        "reconciliation_ok": reconciled(&steady) && reconciled(&most),
    });
    match figures {
        Value::Object(map) => Ok(map),
        _ => unreachable!("json! of an object"),
    }
}

/// The mean of the rounds' figures; a yes/no figure holds when it held in
/// every round.
fn mean(runs: &[Map<String, Value>]) -> Map<String, Value> {
    runs[0]
        .iter()
        .map(|(key, value)| {
            let figure = match value {
                Value::Bool(_) => json!(runs.iter().all(|run| run[key] == json!(true))),
                _ => {
                    let sum: f64 = runs
                        .iter()
                        .map(|run| run[key].as_f64().unwrap_or(f64::NAN))
                        .sum();
                    json!(sum / runs.len() as f64)
                }
            };
            (key.clone(), figure)
        })
        .collect()
}

fn f(figures: &Map<String, Value>, key: &str) -> f64 {
    figures[key].as_f64().unwrap_or(f64::NAN)
}

/// The rows of the table: a figure's name and how it is shown.
type Show = fn(&Map<String, Value>) -> String;
const ROWS: [(&str, Show); 14] = [
    ("steady 1,400/s e2e p50 / p95 / p99 (ms)", |m| {
        format!(
            "{} / {} / {}",
            fixed(f(m, "steady_e2e_p50_ms"), 1),
            fixed(f(m, "steady_e2e_p95_ms"), 1),
            fixed(f(m, "steady_e2e_p99_ms"), 1)
        )
    }),
    ("steady batch p95 (ms)", |m| {
        fixed(f(m, "steady_batch_p95_ms"), 1)
    }),
    ("max throughput (events/s)", |m| {
        grouped(f(m, "max_throughput_eps"), 0)
    }),
    ("db-only ceiling (events/s)", |m| {
        grouped(f(m, "db_only_ceiling_eps"), 0)
    }),
    ("statement time per 100 events (ms)", |m| {
        fixed(f(m, "statement_ms_per_100_events"), 1)
    }),
    ("ledger bytes per event", |m| {
        fixed(f(m, "ledger_bytes_per_event"), 0)
    }),
    ("reservation bytes per line", |m| {
        fixed(f(m, "reservation_bytes_per_line"), 0)
    }),
    ("ledger bytes per event, whole table", |m| {
        fixed(f(m, "ledger_table_bytes_per_event"), 0)
    }),
    ("reservation bytes per line, whole table", |m| {
        fixed(f(m, "reservation_table_bytes_per_line"), 0)
    }),
    ("WAL bytes per event", |m| {
        fixed(f(m, "wal_bytes_per_event"), 0)
    }),
    ("ledger / reservation rows", |m| {
        format!(
            "{} / {}",
            grouped(f(m, "ledger_rows"), 0),
            grouped(f(m, "reservation_rows"), 0)
        )
    }),
    ("ledger / reservation index MB", |m| {
        format!(
            "{} / {}",
            grouped(f(m, "ledger_index_bytes") / 1e6, 0),
            grouped(f(m, "reservation_index_bytes") / 1e6, 0)
        )
    }),
    ("autovacuum / autoanalyze runs (ceiling)", |m| {
        format!(
            "{} / {}",
            general(f(m, "autovacuums_during_ceiling")),
            general(f(m, "autoanalyzes_during_ceiling"))
        )
    }),
    ("reconciled", |m| {
        if m["reconciliation_ok"] == json!(true) {
            "yes"
        } else {
            "NO"
        }
        .to_owned()
    }),
];

pub fn table(files: &dyn Files, history_events: i64, rounds: usize) -> Result<Table> {
    if rounds == 0 {
        return Err(anyhow!("no rounds"));
    }
    let each = |size: &str| -> Result<Vec<Map<String, Value>>> {
        (1..=rounds)
            .map(|round| size_figures(files, &format!("{size}_{round}")))
            .collect()
    };
    let (empties, histories) = (each("empty")?, each("history")?);
    let (empty, history) = (mean(&empties), mean(&histories));
    let ratios = |key: &str| -> Vec<f64> {
        empties
            .iter()
            .zip(&histories)
            .map(|(e, h)| f(h, key) / f(e, key))
            .collect()
    };
    let p95_ratios = ratios("steady_e2e_p95_ms");
    let max_ratios = ratios("max_throughput_eps");
    let p95_ratio = p95_ratios.iter().sum::<f64>() / rounds as f64;
    let max_ratio = max_ratios.iter().sum::<f64>() / rounds as f64;

    let mut text = format!(
        "| figure (mean of {rounds} rounds) | empty | {} events of history |\n|---|---|---|\n",
        grouped_int(history_events)
    );
    for (name, show) in ROWS {
        text += &format!("| {name} | {} | {} |\n", show(&empty), show(&history));
    }
    let listed = |ratios: &[f64]| {
        ratios
            .iter()
            .map(|r| fixed(*r, 2))
            .collect::<Vec<_>>()
            .join(" ")
    };
    text += &format!(
        "\nhistory/empty: steady p95 {} (rounds: {}), max throughput {} (rounds: {}) (must: within 10 %)\n",
        fixed(p95_ratio, 2),
        listed(&p95_ratios),
        fixed(max_ratio, 2),
        listed(&max_ratios)
    );
    let json = json!({
        "history_events": history_events,
        "rounds": rounds,
        "empty": empty,
        "history": history,
        "empty_rounds": empties,
        "history_rounds": histories,
        "steady_p95_history_vs_empty_rounds": p95_ratios,
        "max_throughput_history_vs_empty_rounds": max_ratios,
        "steady_p95_history_vs_empty": p95_ratio,
        "max_throughput_history_vs_empty": max_ratio,
    });
    Ok(Table {
        json,
        text,
        ok: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tables::fixtures::run_report;

    fn snapshot_text(
        ledger_bytes: i64,
        reservation_rows: i64,
        wal: i64,
        autovacuums: i64,
    ) -> String {
        format!(
            "inbox_parked 8192 16384 3 0 0\n\
             order_reservation {ledger_bytes} 1000 {reservation_rows} 0 1\n\
             processed_inbox {ledger_bytes} 2000000 500 {autovacuums} 0\n\
             wal {wal} 0 0 0 0\n"
        )
    }

    /// Round figures: history slower by `slower` and at `max` events/s.
    fn add_size(
        files: &mut BTreeMap<String, String>,
        size: &str,
        p95: f64,
        max: f64,
        autovacuums: i64,
    ) {
        let put = |files: &mut BTreeMap<String, String>, name: &str, text: String| {
            files.insert(format!("scale_{size}_{name}"), text);
        };
        put(
            files,
            "steady.json",
            run_report(1400.0, [p95 / 2.0, p95, p95 * 2.0], 4.0, None, 0).to_string(),
        );
        put(
            files,
            "max.json",
            run_report(max, [0.0; 3], 9.0, None, 0).to_string(),
        );
        put(
            files,
            "ceiling.json",
            json!({"events": 1000, "events_per_second": 20_000.0}).to_string(),
        );
        put(
            files,
            "before.txt",
            snapshot_text(1_000_000, 100, 5_000_000, 2),
        );
        put(
            files,
            "after.txt",
            snapshot_text(1_300_000, 2_100, 6_500_000, 2 + autovacuums),
        );
    }

    fn folder() -> BTreeMap<String, String> {
        let mut files = BTreeMap::new();
        add_size(&mut files, "empty_1", 10.0, 20_000.0, 0);
        add_size(&mut files, "history_1", 11.0, 18_000.0, 1);
        add_size(&mut files, "empty_2", 10.0, 20_000.0, 0);
        add_size(&mut files, "history_2", 10.5, 19_000.0, 2);
        files
    }

    #[test]
    fn a_snapshot_is_a_size_per_table() {
        let sizes = snapshot("s.txt", "wal 10 0 0 0 0\n\nprocessed_inbox 1 2 3 4 5\n").unwrap();
        assert_eq!(
            sizes["processed_inbox"],
            Size {
                heap: 1,
                index: 2,
                rows: 3,
                autovacuums: 4,
                autoanalyzes: 5
            }
        );
        assert_eq!(sizes["wal"].heap, 10);
        assert!(snapshot("s.txt", "wal 10 0\n").is_err());
    }

    #[test]
    fn the_figures_are_the_means_of_the_rounds_beside_each_other() {
        let table = table(&folder(), 30_000_000, 2).unwrap();
        let lines: Vec<&str> = table.text.lines().collect();
        assert_eq!(
            lines[0],
            "| figure (mean of 2 rounds) | empty | 30,000,000 events of history |"
        );
        assert_eq!(
            lines[2],
            "| steady 1,400/s e2e p50 / p95 / p99 (ms) | 5.0 / 10.0 / 20.0 | 5.4 / 10.8 / 21.5 |"
        );
        assert_eq!(lines[4], "| max throughput (events/s) | 20,000 | 18,500 |");
        assert_eq!(
            lines[6],
            "| statement time per 100 events (ms) | 5.0 | 5.0 |"
        );
        // 300,000 heap + 0 index bytes over 1,000 events; the WAL 1,500,000.
        assert_eq!(lines[7], "| ledger bytes per event | 300 | 300 |");
        assert_eq!(lines[8], "| reservation bytes per line | 150 | 150 |");
        // The whole tables after: 3,300,000 bytes over 500 ledger rows,
        // 1,301,000 over 2,100 order lines.
        assert_eq!(
            lines[9],
            "| ledger bytes per event, whole table | 6600 | 6600 |"
        );
        assert_eq!(
            lines[10],
            "| reservation bytes per line, whole table | 620 | 620 |"
        );
        assert_eq!(lines[11], "| WAL bytes per event | 1500 | 1500 |");
        assert_eq!(
            lines[13],
            "| ledger / reservation index MB | 2 / 0 | 2 / 0 |"
        );
        assert_eq!(
            lines[14],
            "| autovacuum / autoanalyze runs (ceiling) | 0 / 0 | 1.5 / 0 |"
        );
        assert_eq!(lines[15], "| reconciled | yes | yes |");
        assert_eq!(
            lines[17],
            "history/empty: steady p95 1.08 (rounds: 1.10 1.05), max throughput 0.93 (rounds: 0.90 0.95) (must: within 10 %)"
        );
        assert_eq!(
            table.json["history"]["autovacuums_during_ceiling"],
            json!(1.5)
        );
        assert_eq!(table.json["empty_rounds"][0]["ledger_rows"], json!(500));
    }
}
