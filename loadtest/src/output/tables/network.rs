//! `make bench-network` (scripts/bench-network.sh): per distance to the
//! database (loopback and each RTT), its steady, max and backlog runs
//! gathered into network.json, one table with the ratios to loopback, and
//! the checks against docs/design.md#numbers's must and aim. With
//! `--sweep`, the lanes measurement: max and steady per pool size and RTT,
//! into lanes.json. The verdict, both ways: every run reconciled (a must
//! not met is shown, not failed).

use anyhow::Result;
use serde_json::{json, Map, Value};

use super::bench::spike_batch;
use super::{fixed, grouped, number, reconciled, reconciliation_sum, Files, Table};

/// The RTTs of the lanes sweep, in ms.
const SWEEP_RTTS: [&str; 3] = ["0", "2", "10"];

/// The lanes sweep: `lanes{n}_rtt{rtt}_{max,steady}.json` for each pool
/// size in `lanes`.
pub fn lanes(files: &dyn Files, lanes: &[String], results_path: &str) -> Result<Table> {
    let mut table = Map::new();
    let mut text = format!(
        "\n{:<6} {:>6} {:>13} {:>11} {:>11}\n",
        "lanes", "RTT", "max events/s", "steady p95", "steady p99"
    );
    for rtt in SWEEP_RTTS {
        for n in lanes {
            let name = format!("lanes{n}_rtt{rtt}");
            let top = files.json(&format!("{name}_max.json"))?;
            let steady = files.json(&format!("{name}_steady.json"))?;
            let ok = reconciled(&top) && reconciled(&steady);
            let steady_file = format!("{name}_steady.json");
            text += &format!(
                "{n:<6} {:>6} {:>13} {:>8} ms {:>8} ms{}\n",
                format!("{rtt} ms"),
                grouped(
                    number(&top, &format!("{name}_max.json"), &["throughput_eps"])?,
                    0
                ),
                fixed(
                    number(&steady, &steady_file, &["e2e_latency_ms", "p95"])?,
                    1
                ),
                fixed(
                    number(&steady, &steady_file, &["e2e_latency_ms", "p99"])?,
                    1
                ),
                if ok { "" } else { "  NOT RECONCILED" }
            );
            table.insert(
                name,
                json!({
                    "max_throughput_eps": top["throughput_eps"],
                    "steady_e2e_ms": steady["e2e_latency_ms"],
                    "reconciled": ok,
                }),
            );
        }
    }
    text += &format!("\nresults: {results_path}\n");
    let ok = table.values().all(|row| row["reconciled"] == json!(true));
    Ok(Table {
        json: json!(table),
        text,
        ok,
    })
}

/// One distance's three runs.
struct Row {
    /// `loopback` or `rtt{ms}`.
    label: String,
    e2e: [f64; 3],
    batch_p95: f64,
    steady_eps: f64,
    max_eps: f64,
    /// `None` when the backlog run has no catch-up (shown as `nan`).
    catch_up: Option<f64>,
    catch_up_batch_p95: f64,
    reconciled: bool,
    lost: i64,
    doubled: i64,
    json: Map<String, Value>,
}

fn row(files: &dyn Files, label: &str) -> Result<Row> {
    let [steady_file, max_file, backlog_file] =
        ["steady", "max", "backlog"].map(|run| format!("{label}_{run}.json"));
    let steady = files.json(&steady_file)?;
    let top = files.json(&max_file)?;
    let backlog = files.json(&backlog_file)?;
    let runs = [&steady, &top, &backlog];
    let e2e = ["p50", "p95", "p99"].map(|q| number(&steady, &steady_file, &["e2e_latency_ms", q]));
    let [p50, p95, p99] = e2e;
    let reconciled = runs.iter().all(|r| reconciled(r));
    let lost = reconciliation_sum(&runs, "lost_events");
    let doubled = reconciliation_sum(&runs, "doubled_events");
    let json = json!({
        "steady_e2e_ms": steady["e2e_latency_ms"],
        "steady_batch_ms": steady["batch_duration_ms"],
        "steady_produce_ack_ms": steady.get("produce_ack_ms"),
        "steady_throughput_eps": steady["throughput_eps"],
        "max_throughput_eps": top["throughput_eps"],
        "catch_up_seconds": backlog["catch_up_seconds"],
        "catch_up_batch_p95_ms": spike_batch(&backlog)["p95"],
        "reconciled": reconciled,
        "lost_events": lost,
        "doubled_events": doubled,
    });
    Ok(Row {
        label: label.to_owned(),
        e2e: [p50?, p95?, p99?],
        batch_p95: number(&steady, &steady_file, &["batch_duration_ms", "p95"])?,
        steady_eps: number(&steady, &steady_file, &["throughput_eps"])?,
        max_eps: number(&top, &max_file, &["throughput_eps"])?,
        catch_up: backlog["catch_up_seconds"].as_f64(),
        catch_up_batch_p95: number(spike_batch(&backlog), &backlog_file, &["p95"])?,
        reconciled,
        lost,
        doubled,
        json: match json {
            Value::Object(map) => map,
            _ => unreachable!("json! of an object"),
        },
    })
}

/// One figure of docs/design.md#numbers checked.
struct Check {
    figure: String,
    measured: String,
    must: &'static str,
    aim: &'static str,
    must_met: bool,
    aim_met: bool,
}

fn checks(rows: &[Row]) -> Result<Vec<Check>> {
    let find = |label: &str| rows.iter().find(|r| r.label == label);
    let mut checks = Vec::new();
    for (label, must, aim, must_text, aim_text) in [
        ("rtt2", 20.0, 15.0, "<= 20 ms", "<= 15 ms"),
        ("rtt10", 45.0, 25.0, "<= 45 ms", "<= 25 ms"),
    ] {
        if let Some(r) = find(label) {
            let p95 = r.e2e[1];
            checks.push(Check {
                figure: format!("steady 1,400/s e2e p95 at {} ms RTT", &label[3..]),
                measured: format!("{} ms", fixed(p95, 1)),
                must: must_text,
                aim: aim_text,
                must_met: p95 <= must,
                aim_met: p95 <= aim,
            });
        }
    }
    if let Some(r) = find("rtt50") {
        checks.push(Check {
            figure: "steady 1,400/s at 50 ms RTT".to_owned(),
            measured: format!(
                "{}/s, p95 {} ms",
                grouped(r.steady_eps, 0),
                fixed(r.e2e[1], 1)
            ),
            must: "keeps up, reconciled",
            aim: "p95 <= 115 ms",
            must_met: r.reconciled && r.steady_eps >= 1400.0 * 0.9,
            aim_met: r.e2e[1] <= 115.0,
        });
    }
    if let Some(r) = find("rtt10") {
        checks.push(Check {
            figure: "max throughput at 10 ms RTT".to_owned(),
            measured: format!("{}/s", grouped(r.max_eps, 0)),
            must: ">= 5,000/s",
            aim: ">= 15,000/s",
            must_met: r.max_eps >= 5000.0,
            aim_met: r.max_eps >= 15000.0,
        });
        let catch_up = r.catch_up.ok_or_else(|| {
            anyhow::anyhow!("rtt10_backlog.json: catch_up_seconds is not a number")
        })?;
        checks.push(Check {
            figure: "catch-up of a 60 s backlog at 10 ms RTT".to_owned(),
            measured: format!("{} s", fixed(catch_up, 1)),
            must: "< 60 s",
            aim: "<= 10 s",
            must_met: catch_up < 60.0,
            aim_met: catch_up <= 10.0,
        });
    }
    let all_reconciled = rows.iter().all(|r| r.reconciled);
    checks.push(Check {
        figure: "lost / applied twice, every run".to_owned(),
        measured: format!(
            "{} / {}",
            rows.iter().map(|r| r.lost).sum::<i64>(),
            rows.iter().map(|r| r.doubled).sum::<i64>()
        ),
        must: "0 / 0",
        aim: "0 / 0",
        must_met: all_reconciled,
        aim_met: all_reconciled,
    });
    Ok(checks)
}

/// Loopback and each of `rtts` (ms): `{label}_{steady,max,backlog}.json`.
pub fn table(files: &dyn Files, rtts: &[String], results_path: &str) -> Result<Table> {
    let mut rows = Vec::new();
    for label in
        std::iter::once("loopback".to_owned()).chain(rtts.iter().map(|r| format!("rtt{r}")))
    {
        let row = row(files, &label)?;
        // A label given twice is one row, as in a dict.
        rows.retain(|r: &Row| r.label != label);
        rows.push(row);
    }
    let base = rows
        .iter()
        .find(|r| r.label == "loopback")
        .map(|r| (r.e2e[1], r.max_eps))
        .expect("loopback is the first row");
    let checks = checks(&rows)?;

    let mut text = format!(
        "\n{:<9} {:>26} {:>10} {:>13} {:>9} {:>10} {:>6} {:>6}\n",
        "RTT",
        "steady p50 / p95 / p99",
        "batch p95",
        "max events/s",
        "catch-up",
        "batch p95",
        "p95 x",
        "max x"
    );
    let mut json_rows = Map::new();
    for r in &mut rows {
        let p95_x = r.e2e[1] / base.0;
        let max_x = r.max_eps / base.1;
        r.json.insert("p95_vs_loopback".to_owned(), json!(p95_x));
        r.json.insert("max_vs_loopback".to_owned(), json!(max_x));
        let name = if r.label == "loopback" {
            "loopback".to_owned()
        } else {
            format!("{} ms", &r.label[3..])
        };
        // Python's `catch_up or nan`: no catch-up, or none needed, is nan.
        let catch_up = r.catch_up.filter(|c| *c != 0.0).unwrap_or(f64::NAN);
        text += &format!(
            "{name:<9} {:>7} / {:>6} / {:>6} ms {:>7} ms {:>13} {:>7} s {:>7} ms {:>6} {:>6}{}\n",
            fixed(r.e2e[0], 1),
            fixed(r.e2e[1], 1),
            fixed(r.e2e[2], 1),
            fixed(r.batch_p95, 1),
            grouped(r.max_eps, 0),
            fixed(catch_up, 1),
            fixed(r.catch_up_batch_p95, 1),
            fixed(p95_x, 2),
            fixed(max_x, 2),
            if r.reconciled { "" } else { "  NOT RECONCILED" }
        );
        json_rows.insert(r.label.clone(), Value::Object(r.json.clone()));
    }
    text += "(batch p95 after the max: while catching up the backlog; x: ratio to loopback)\n\n";
    let width = checks.iter().map(|c| c.figure.len()).max().unwrap_or(0);
    text += &format!(
        "{:<width$}  {:<28} {:<21} {:<14} must met\n",
        "figure", "measured", "must", "aim"
    );
    for c in &checks {
        text += &format!(
            "{:<width$}  {:<28} {:<21} {:<14} {}{}\n",
            c.figure,
            c.measured,
            c.must,
            c.aim,
            if c.must_met { "yes" } else { "NO" },
            if c.aim_met { " (aim met)" } else { "" }
        );
    }
    text += &format!("\nresults: {results_path}\n");

    let json = json!({
        "rows": json_rows,
        "checks": checks.iter().map(|c| json!({
            "figure": c.figure, "measured": c.measured, "must": c.must, "aim": c.aim,
            "must_met": c.must_met, "aim_met": c.aim_met,
        })).collect::<Vec<_>>(),
    });
    let ok = rows.iter().all(|r| r.reconciled);
    Ok(Table { json, text, ok })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::output::tables::fixtures::run_report;

    fn put(files: &mut BTreeMap<String, String>, name: &str, report: Value) {
        files.insert(format!("{name}.json"), report.to_string());
    }

    /// Loopback, 2 ms and 10 ms: p95 at 10 ms past the aim, within the must.
    fn folder(lost_at_10: i64) -> BTreeMap<String, String> {
        let mut files = BTreeMap::new();
        for (label, p95, max, catch_up, lost) in [
            ("loopback", 10.0, 20_000.0, Some(0.0), 0),
            ("rtt2", 14.0, 16_000.0, Some(3.0), 0),
            ("rtt10", 30.0, 8_000.0, Some(12.5), lost_at_10),
        ] {
            put(
                &mut files,
                &format!("{label}_steady"),
                run_report(1400.0, [p95 / 2.0, p95, p95 * 2.0], 5.0, None, 0),
            );
            put(
                &mut files,
                &format!("{label}_max"),
                run_report(max, [0.0; 3], 9.0, None, lost),
            );
            put(
                &mut files,
                &format!("{label}_backlog"),
                run_report(1400.0, [0.0; 3], 20.0, catch_up, 0),
            );
        }
        files
    }

    fn rtts() -> Vec<String> {
        vec!["2".to_owned(), "10".to_owned()]
    }

    #[test]
    fn each_distance_is_a_row_with_its_ratios_to_loopback() {
        let table = table(&folder(0), &rtts(), "bench/network.json").unwrap();
        assert!(table.ok);
        let lines: Vec<&str> = table.text.lines().collect();
        assert_eq!(
            lines[2],
            "loopback      5.0 /   10.0 /   20.0 ms     5.0 ms        20,000     nan s    20.0 ms   1.00   1.00"
        );
        assert_eq!(
            lines[4],
            "10 ms        15.0 /   30.0 /   60.0 ms     5.0 ms         8,000    12.5 s    20.0 ms   3.00   0.40"
        );
        assert_eq!(table.json["rows"]["rtt10"]["max_vs_loopback"], json!(0.4));
    }

    #[test]
    fn the_checks_say_which_must_and_aim_are_met() {
        let table = table(&folder(0), &rtts(), "bench/network.json").unwrap();
        let verdicts: Vec<(String, bool, bool)> = table.json["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["figure"].as_str().unwrap().to_owned(),
                    c["must_met"].as_bool().unwrap(),
                    c["aim_met"].as_bool().unwrap(),
                )
            })
            .collect();
        let expected = [
            ("steady 1,400/s e2e p95 at 2 ms RTT", true, true),
            ("steady 1,400/s e2e p95 at 10 ms RTT", true, false),
            ("max throughput at 10 ms RTT", true, false),
            ("catch-up of a 60 s backlog at 10 ms RTT", true, false),
            ("lost / applied twice, every run", true, true),
        ];
        let expected: Vec<(String, bool, bool)> = expected
            .iter()
            .map(|(f, m, a)| (f.to_string(), *m, *a))
            .collect();
        assert_eq!(verdicts, expected);
        assert!(table
            .text
            .contains("<= 20 ms              <= 15 ms       yes (aim met)\n"));
        assert!(table
            .text
            .contains("<= 45 ms              <= 25 ms       yes\n"));
    }

    #[test]
    fn an_unreconciled_run_fails_the_table_and_the_must() {
        let table = table(&folder(2), &rtts(), "bench/network.json").unwrap();
        assert!(!table.ok);
        assert!(table.text.contains("  NOT RECONCILED\n"));
        assert!(table.text.contains("2 / 0 "));
        let last = table.json["checks"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(last["must_met"], json!(false));
    }

    #[test]
    fn at_50_ms_keeping_up_is_nine_tenths_of_the_rate() {
        let mut files = folder(0);
        put(
            &mut files,
            "rtt50_steady",
            run_report(1259.0, [50.0, 100.0, 150.0], 5.0, None, 0),
        );
        put(
            &mut files,
            "rtt50_max",
            run_report(3000.0, [0.0; 3], 9.0, None, 0),
        );
        put(
            &mut files,
            "rtt50_backlog",
            run_report(1400.0, [0.0; 3], 20.0, Some(40.0), 0),
        );
        let table = table(&files, &["50".to_owned()], "bench/network.json").unwrap();
        let check = &table.json["checks"][0];
        assert_eq!(check["figure"], json!("steady 1,400/s at 50 ms RTT"));
        assert_eq!(check["measured"], json!("1,259/s, p95 100.0 ms"));
        assert_eq!(check["must_met"], json!(false));
        assert_eq!(check["aim_met"], json!(true));
    }

    #[test]
    fn the_sweep_is_a_row_per_pool_size_and_rtt() {
        let mut files = BTreeMap::new();
        for rtt in SWEEP_RTTS {
            for n in ["1", "4"] {
                let lost = i64::from(rtt == "10" && n == "4");
                put(
                    &mut files,
                    &format!("lanes{n}_rtt{rtt}_max"),
                    run_report(9_000.0, [0.0; 3], 1.0, None, lost),
                );
                put(
                    &mut files,
                    &format!("lanes{n}_rtt{rtt}_steady"),
                    run_report(1400.0, [3.0, 6.25, 9.0], 1.0, None, 0),
                );
            }
        }
        let table = lanes(
            &files,
            &["1".to_owned(), "4".to_owned()],
            "bench/lanes.json",
        )
        .unwrap();
        assert!(!table.ok);
        let lines: Vec<&str> = table.text.lines().collect();
        assert_eq!(
            lines[1],
            "lanes     RTT  max events/s  steady p95  steady p99"
        );
        assert_eq!(
            lines[2],
            "1        0 ms         9,000      6.2 ms      9.0 ms"
        );
        assert_eq!(
            lines[7],
            "4       10 ms         9,000      6.2 ms      9.0 ms  NOT RECONCILED"
        );
        assert_eq!(table.json["lanes4_rtt2"]["reconciled"], json!(true));
    }
}
