//! `make soak` (scripts/soak.sh): per minute the size of each table, the
//! WAL written and the consumer's batch p95; per simulated day the
//! generator's reconciliation and end-to-end latency; the owner's index
//! compaction. Into soak.json and two tables. The verdict: every day
//! reconciled and every growing table's size levelled off (its largest
//! size in the last third of the soak at most 10 % above its largest
//! before).

use std::collections::BTreeMap;

use anyhow::{anyhow, Context, Result};
use serde_json::{json, Value};

use super::{fixed, grouped, grouped_int, shown, Files, Table};

/// The tables sampled, as loadtest/sql/storage_snapshot.sql names them.
const TABLES: [&str; 7] = [
    "processed_inbox",
    "order_reservation",
    "inbox_parked",
    "inventory_stock",
    "inbox_position",
    "inbox_ledger_filter_chunk",
    "inbox_ledger_filter_slot",
];

/// The tables whose size must level off: those that grow with the events.
const GROWING: [&str; 5] = [
    "processed_inbox",
    "order_reservation",
    "inbox_parked",
    "inbox_ledger_filter_chunk",
    "inbox_ledger_filter_slot",
];

/// A scrape of `inbox_batch_duration_seconds_bucket`: (bound in seconds,
/// count), the bounds in the order they were read.
type Scrape = Vec<(f64, f64)>;

/// What samples.txt holds, by the second it was taken.
#[derive(Debug, Default)]
struct Samples {
    /// Table -> (heap + index bytes, rows).
    sizes: BTreeMap<i64, BTreeMap<String, (i64, i64)>>,
    /// The WAL position.
    wal: BTreeMap<i64, i64>,
    buckets: BTreeMap<i64, Scrape>,
}

fn parse_samples(text: &str) -> Result<Samples> {
    let mut samples = Samples::default();
    for line in text.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        if parts.len() < 3 {
            continue;
        }
        let int = |s: &str| {
            s.parse::<i64>()
                .with_context(|| format!("samples.txt: {line:?}"))
        };
        let at = int(parts[1])?;
        match parts[0] {
            "size" if parts.len() == 8 => {
                let (heap, index, rows) = (int(parts[3])?, int(parts[4])?, int(parts[5])?);
                if parts[2] == "wal" {
                    samples.wal.insert(at, heap);
                } else {
                    samples
                        .sizes
                        .entry(at)
                        .or_default()
                        .insert(parts[2].to_owned(), (heap + index, rows));
                }
            }
            "metric" => {
                let bad = || anyhow!("samples.txt: {line:?} is not a bucket");
                let le = parts[2].split_once("le=\"").ok_or_else(bad)?.1;
                let le = le.split('"').next().unwrap_or_default();
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse::<f64>().map_err(|_| bad())?
                };
                let count = parts
                    .get(3)
                    .and_then(|c| c.parse::<f64>().ok())
                    .ok_or_else(bad)?;
                let scrape = samples.buckets.entry(at).or_default();
                match scrape.iter_mut().find(|(b, _)| *b == bound) {
                    Some((_, c)) => *c = count,
                    None => scrape.push((bound, count)),
                }
            }
            _ => {}
        }
    }
    Ok(samples)
}

/// The 95th percentile (the upper bound of its bucket, in ms) of the
/// batches between two scrapes; `None` when there were none or it is in
/// the `+Inf` bucket.
pub fn batch_p95(before: Option<&Scrape>, after: Option<&Scrape>) -> Option<f64> {
    let (before, after) = (
        before.filter(|b| !b.is_empty())?,
        after.filter(|a| !a.is_empty())?,
    );
    let mut bounds: Vec<(f64, f64)> = after.clone();
    bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let counts: Vec<(f64, f64)> = bounds
        .iter()
        .map(|(bound, count)| {
            let earlier = before
                .iter()
                .find(|(b, _)| b == bound)
                .map_or(0.0, |(_, c)| *c);
            (*bound, count - earlier)
        })
        .collect();
    let total = counts.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let (bound, _) = counts.iter().find(|(_, count)| *count >= 0.95 * total)?;
    bound.is_finite().then(|| bound * 1000.0)
}

/// One minute's sample.
struct Minute {
    minute: i64,
    simulated_day: i64,
    bytes: [i64; TABLES.len()],
    rows: [i64; TABLES.len()],
    wal_bytes: Option<i64>,
    batch_p95_ms: Option<f64>,
}

fn minutes(samples: &Samples, day_seconds: i64) -> Vec<Minute> {
    let instants: Vec<i64> = samples.sizes.keys().copied().collect();
    let start = instants.first().copied().unwrap_or(0);
    instants
        .iter()
        .enumerate()
        .map(|(i, &at)| {
            let previous = i.checked_sub(1).map(|p| instants[p]);
            let size = |t: &str| samples.sizes[&at].get(t).copied().unwrap_or((0, 0));
            Minute {
                minute: ((at - start) as f64 / 60.0).round_ties_even() as i64,
                simulated_day: (at - start).div_euclid(day_seconds),
                bytes: TABLES.map(|t| size(t).0),
                rows: TABLES.map(|t| size(t).1),
                wal_bytes: previous
                    .and_then(|p| Some(samples.wal.get(&at)? - samples.wal.get(&p)?)),
                // As the script had it: a previous sample at second 0 is none.
                batch_p95_ms: previous
                    .filter(|p| *p != 0)
                    .and_then(|p| batch_p95(samples.buckets.get(&p), samples.buckets.get(&at))),
            }
        })
        .collect()
}

fn column(table: &str) -> usize {
    TABLES
        .iter()
        .position(|t| *t == table)
        .expect("a sampled table")
}

/// Whether a table's size levelled off: its largest size in the last third
/// of the minutes, and before.
struct Level {
    table: &'static str,
    before: i64,
    last: i64,
}

impl Level {
    fn levels_off(&self) -> bool {
        self.before > 0 && self.last as f64 <= 1.10 * self.before as f64
    }
}

fn levels(minutes: &[Minute]) -> Vec<Level> {
    let split = minutes.len() - minutes.len() / 3;
    let largest = |part: &[Minute], c: usize| part.iter().map(|m| m.bytes[c]).max().unwrap_or(0);
    GROWING
        .iter()
        .map(|&table| Level {
            table,
            before: largest(&minutes[..split], column(table)),
            last: largest(&minutes[split..], column(table)),
        })
        .collect()
}

/// The owner's maintenance runs (a line each in maintain.log) and the
/// indexes of closed days they compacted.
#[derive(Debug, Default, PartialEq)]
pub struct Compacted {
    pub runs: i64,
    pub indexes: i64,
    pub bytes_before: i64,
    pub bytes_after: i64,
}

/// `compacted: N (B -> A bytes)` in a line, the first that parses.
fn compacted_in(line: &str) -> Option<(i64, i64, i64)> {
    line.match_indices("compacted: ").find_map(|(at, marker)| {
        let rest = &line[at + marker.len()..];
        let digits = |s: &str| -> Option<(i64, usize)> {
            let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
            Some((s[..end].parse().ok()?, end))
        };
        let (indexes, n) = digits(rest)?;
        let rest = rest[n..].strip_prefix(" (")?;
        let (before, n) = digits(rest)?;
        let rest = rest[n..].strip_prefix(" -> ")?;
        let (after, n) = digits(rest)?;
        rest[n..].strip_prefix(" bytes)")?;
        Some((indexes, before, after))
    })
}

pub fn compacted(log: &str) -> Compacted {
    let mut total = Compacted::default();
    for line in log.lines() {
        total.runs += 1;
        if let Some((indexes, before, after)) = compacted_in(line) {
            total.indexes += indexes;
            total.bytes_before += before;
            total.bytes_after += after;
        }
    }
    total
}

/// A day's generator report, as the table shows it.
fn day_report(files: &dyn Files, day: i64) -> Result<Value> {
    let name = format!("day_{day}.json");
    if files.text(&name)?.is_none() {
        return Ok(json!({"day": day, "ok": false, "missing": true}));
    }
    let report = files.json(&name)?;
    let reconciliation = report
        .get("reconciliation")
        .ok_or_else(|| anyhow!("{name}: no reconciliation"))?;
    let e2e = report.get("e2e_latency_ms").cloned().unwrap_or(Value::Null);
    let e2e_at = |q: &str| e2e.get(q).cloned().unwrap_or(Value::Null);
    Ok(json!({
        "day": day,
        "ok": reconciliation["ok"],
        "unique_events": report.get("unique_events"),
        "doubled_events": reconciliation["doubled_events"],
        "lost_events": reconciliation["lost_events"],
        "e2e_p95_ms": e2e_at("p95"),
        "e2e_p99_ms": e2e_at("p99"),
    }))
}

/// Python's truth of a JSON value.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn mb(bytes: i64) -> String {
    grouped(bytes as f64 / 1e6, 0)
}

pub fn table(files: &dyn Files, days: i64, day_seconds: i64) -> Result<Table> {
    if day_seconds <= 0 {
        return Err(anyhow!("a simulated day of {day_seconds} s"));
    }
    let samples = parse_samples(&files.required("samples.txt")?)?;
    let minutes = minutes(&samples, day_seconds);
    let reports = (0..days)
        .map(|day| day_report(files, day))
        .collect::<Result<Vec<_>>>()?;
    let levels = levels(&minutes);
    let compacted = compacted(&files.text("maintain.log")?.unwrap_or_default());
    let all_reconciled = reports.iter().all(|r| truthy(&r["ok"]));

    let mut text = String::from(
        "| minute | day | ledger MB (rows) | reservations MB (rows) | parked MB (rows) | stock MB | WAL MB/min | batch p95 ms |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let [ledger, reservations, parked, stock] = [
        "processed_inbox",
        "order_reservation",
        "inbox_parked",
        "inventory_stock",
    ]
    .map(column);
    for m in &minutes {
        let (b, r) = (&m.bytes, &m.rows);
        text += &format!(
            "| {} | {} | {} ({}) | {} ({}) | {} ({}) | {} | {} | {} |\n",
            m.minute,
            m.simulated_day,
            mb(b[ledger]),
            grouped_int(r[ledger]),
            mb(b[reservations]),
            grouped_int(r[reservations]),
            mb(b[parked]),
            grouped_int(r[parked]),
            fixed(b[stock] as f64 / 1e6, 1),
            m.wal_bytes.map_or("-".to_owned(), mb),
            m.batch_p95_ms.map_or("-".to_owned(), |p| fixed(p, 0)),
        );
    }
    text += "\n| day | reconciled | unique events | doubled / lost | e2e p95 / p99 ms |\n|---|---|---|---|---|\n";
    for r in &reports {
        let day = &r["day"];
        if r.get("missing").is_some() {
            text += &format!("| {day} | no report | - | - | - |\n");
            continue;
        }
        let name = format!("day_{day}.json");
        let p95s = match r["e2e_p95_ms"].as_f64() {
            None => "-".to_owned(),
            Some(p95) => format!(
                "{} / {}",
                fixed(p95, 1),
                fixed(
                    r["e2e_p99_ms"]
                        .as_f64()
                        .ok_or_else(|| anyhow!("{name}: e2e_latency_ms.p99 is not a number"))?,
                    1
                )
            ),
        };
        let unique = r["unique_events"]
            .as_i64()
            .ok_or_else(|| anyhow!("{name}: unique_events is not a number"))?;
        text += &format!(
            "| {day} | {} | {} | {} / {} | {p95s} |\n",
            if truthy(&r["ok"]) { "yes" } else { "NO" },
            grouped_int(unique),
            shown(&r["doubled_events"]),
            shown(&r["lost_events"]),
        );
    }
    text += "\n";
    for level in &levels {
        text += &format!(
            "{}: largest {} MB before the last third, {} MB in it: {}\n",
            level.table,
            mb(level.before),
            mb(level.last),
            if level.levels_off() {
                "levels off"
            } else {
                "DOES NOT level off"
            }
        );
    }
    text += &format!(
        "owner's maintenance: {} runs, {} indexes of closed days compacted, {} -> {} MB\n",
        compacted.runs,
        compacted.indexes,
        mb(compacted.bytes_before),
        mb(compacted.bytes_after)
    );

    let per_table = |values: &[i64; TABLES.len()]| {
        TABLES
            .iter()
            .zip(values)
            .map(|(t, v)| ((*t).to_owned(), json!(v)))
            .collect::<serde_json::Map<_, _>>()
    };
    let json = json!({
        "days": days,
        "owner_maintenance": {
            "indexes": compacted.indexes, "bytes_before": compacted.bytes_before,
            "bytes_after": compacted.bytes_after, "runs": compacted.runs,
        },
        "day_seconds": day_seconds,
        "minutes": minutes.iter().map(|m| json!({
            "minute": m.minute,
            "simulated_day": m.simulated_day,
            "bytes": per_table(&m.bytes),
            "rows": per_table(&m.rows),
            "wal_bytes": m.wal_bytes,
            "batch_p95_ms": m.batch_p95_ms,
        })).collect::<Vec<_>>(),
        "days_reconciled": reports,
        "level_off": levels.iter().map(|l| (l.table.to_owned(), json!({
            "largest_before_last_third": l.before,
            "largest_in_last_third": l.last,
            "levels_off": l.levels_off(),
        }))).collect::<serde_json::Map<_, _>>(),
        "all_reconciled": all_reconciled,
        "events": reports.iter().map(|r| r["unique_events"].as_i64().unwrap_or(0)).sum::<i64>(),
    });
    let ok = all_reconciled && levels.iter().all(Level::levels_off);
    Ok(Table { json, text, ok })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tables::fixtures::run_report;

    /// A sample every 60 s from second 1000: the ledger at `ledger(i)` MB,
    /// a batch histogram growing by 100 batches a minute, 96 under 10 ms.
    fn samples(n: i64, ledger: impl Fn(i64) -> i64) -> String {
        let mut text = String::new();
        for i in 0..n {
            let at = 1000 + 60 * i;
            for table in TABLES {
                let bytes = if table == "processed_inbox" {
                    ledger(i) * 1_000_000
                } else {
                    1_000_000
                };
                text += &format!("size {at} {table} {bytes} 0 {} 0 0\n", 1000 * i);
            }
            text += &format!("size {at} wal {} 0 0 0 0\n", 5_000_000 * i);
            for (le, count) in [("0.005", 50), ("0.01", 96), ("0.025", 100), ("+Inf", 100)] {
                text += &format!(
                    "metric {at} inbox_batch_duration_seconds_bucket{{le=\"{le}\"}} {}\n",
                    count * i
                );
            }
        }
        text
    }

    fn folder(ledger: impl Fn(i64) -> i64, lost_on_day_1: i64) -> BTreeMap<String, String> {
        let mut files = BTreeMap::new();
        files.insert("samples.txt".to_owned(), samples(9, ledger));
        files.insert(
            "maintain.log".to_owned(),
            "1 compacted: 2 (3000000 -> 1000000 bytes)\n2 nothing to do\n3 compacted: 1 (500000 -> 500000 bytes)\n"
                .to_owned(),
        );
        for day in 0..2 {
            let mut report = run_report(
                1400.0,
                [2.0, 8.0, 12.5],
                4.0,
                None,
                if day == 1 { lost_on_day_1 } else { 0 },
            );
            report["unique_events"] = json!(420_000);
            files.insert(format!("day_{day}.json"), report.to_string());
        }
        files
    }

    #[test]
    fn sizes_that_level_off_and_reconciled_days_pass() {
        let table = table(&folder(|i| 10 + i.min(4), 0), 3, 300).unwrap();
        assert!(!table.ok, "day 2 has no report: not reconciled");
        let lines: Vec<&str> = table.text.lines().collect();
        assert_eq!(lines[2], "| 0 | 0 | 10 (0) | 1 (0) | 1 (0) | 1.0 | - | - |");
        assert_eq!(
            lines[7],
            "| 5 | 1 | 14 (5,000) | 1 (5,000) | 1 (5,000) | 1.0 | 5 | 10 |"
        );
        assert_eq!(lines[14], "| 0 | yes | 420,000 | 0 / 0 | 8.0 / 12.5 |");
        assert_eq!(lines[16], "| 2 | no report | - | - | - |");
        assert_eq!(
            lines[18],
            "processed_inbox: largest 14 MB before the last third, 14 MB in it: levels off"
        );
        assert_eq!(
            *lines.last().unwrap(),
            "owner's maintenance: 3 runs, 3 indexes of closed days compacted, 4 -> 2 MB"
        );
        assert_eq!(table.json["all_reconciled"], json!(false));
        assert_eq!(table.json["events"], json!(840_000));
    }

    #[test]
    fn a_growing_table_or_a_lost_event_fails_the_soak() {
        let growing = table(&folder(|i| 10 + i, 0), 2, 300).unwrap();
        assert!(!growing.ok);
        assert!(growing.text.contains("processed_inbox: largest 15 MB before the last third, 18 MB in it: DOES NOT level off\n"));
        let flat = table(&folder(|_| 10, 0), 2, 300).unwrap();
        assert!(flat.ok);
        let lost = table(&folder(|_| 10, 1), 2, 300).unwrap();
        assert!(!lost.ok);
        assert!(lost
            .text
            .contains("| 1 | NO | 420,000 | 0 / 1 | 8.0 / 12.5 |\n"));
    }

    #[test]
    fn the_batch_p95_is_the_upper_bound_of_its_bucket() {
        let before = vec![(0.005, 10.0), (0.01, 10.0), (f64::INFINITY, 10.0)];
        let after = vec![(f64::INFINITY, 110.0), (0.005, 60.0), (0.01, 105.0)];
        assert_eq!(batch_p95(Some(&before), Some(&after)), Some(10.0));
        let slow = vec![(0.005, 10.0), (0.01, 10.0), (f64::INFINITY, 110.0)];
        assert_eq!(batch_p95(Some(&before), Some(&slow)), None);
        assert_eq!(batch_p95(Some(&before), Some(&before)), None);
        assert_eq!(batch_p95(None, Some(&after)), None);
    }

    #[test]
    fn compaction_is_read_from_the_first_marker_that_parses() {
        let log = "compacted: x compacted: 4 (10 -> 5 bytes)\n";
        assert_eq!(
            compacted(log),
            Compacted {
                runs: 1,
                indexes: 4,
                bytes_before: 10,
                bytes_after: 5
            }
        );
    }
}
