//! `make bench` (scripts/bench.sh): its six reports gathered into
//! results.json, and the figures beside the must and aim columns of
//! docs/design.md#numbers. The verdict: every run reconciled.

use anyhow::Result;
use serde_json::{json, Map, Value};

use super::{fixed, grouped, number, percent, reconciled, reconciliation_sum, Files, Table};

/// The reports `make bench` writes, by scenario.
const REPORTS: [&str; 6] = [
    "steady",
    "lag_spike",
    "max_batch",
    "max_per_record",
    "db_ceiling",
    "floor",
];

/// The batch durations while catching up: those of the spike's window, or
/// of the whole run when the report has none.
pub fn spike_batch(report: &Value) -> &Value {
    match report.get("batch_duration_spike_ms") {
        Some(Value::Object(window)) if !window.is_empty() => &report["batch_duration_spike_ms"],
        _ => &report["batch_duration_ms"],
    }
}

pub fn table(files: &dyn Files, results_path: &str) -> Result<Table> {
    let mut reports = Map::new();
    for name in REPORTS {
        reports.insert(name.to_owned(), files.json(&format!("{name}.json"))?);
    }
    let [steady, spike, batch, per_record, ceiling, floor] = REPORTS.map(|name| &reports[name]);
    let runs = [steady, spike, batch, per_record];

    let max = number(batch, "max_batch.json", &["throughput_eps"])?;
    let per_record_eps = number(per_record, "max_per_record.json", &["throughput_eps"])?;
    let ceiling_eps = number(ceiling, "db_ceiling.json", &["events_per_second"])?;
    let floor_eps = number(floor, "floor.json", &["events_per_second"])?;
    let ratio = max / per_record_eps;
    let e2e_p95 = number(steady, "steady.json", &["e2e_latency_ms", "p95"])?;
    let e2e_p99 = number(steady, "steady.json", &["e2e_latency_ms", "p99"])?;
    let catch_up_batch_p95 = number(spike_batch(spike), "lag_spike.json", &["p95"])?;
    let catch_up = number(spike, "lag_spike.json", &["catch_up_seconds"])?;
    let ok = runs.iter().all(|r| reconciled(r));
    let doubled = reconciliation_sum(&runs, "doubled_events");
    let lost = reconciliation_sum(&runs, "lost_events");

    let json = json!({
        "steady_e2e_p95_ms": steady["e2e_latency_ms"]["p95"],
        "steady_e2e_p99_ms": steady["e2e_latency_ms"]["p99"],
        "steady_batch_p95_ms": steady["batch_duration_ms"]["p95"],
        "catch_up_batch_p95_ms": spike_batch(spike)["p95"],
        "catch_up_seconds": spike["catch_up_seconds"],
        "max_throughput_eps": batch["throughput_eps"],
        "per_record_throughput_eps": per_record["throughput_eps"],
        "batch_vs_per_record": ratio,
        "db_only_ceiling_eps": ceiling["events_per_second"],
        "pipeline_fraction_of_ceiling": max / ceiling_eps,
        "floor_eps": floor["events_per_second"],
        "ceiling_over_floor": ceiling_eps / floor_eps,
        "reconciliation_ok": ok,
        "doubled_events": doubled,
        "lost_events": lost,
        "reports": reports,
    });

    let rows = [
        (
            "steady 1,400/s, end-to-end p95",
            format!("{} ms", fixed(e2e_p95, 1)),
            "<= 45 ms",
            "<= 15 ms",
        ),
        (
            "steady 1,400/s, end-to-end p99",
            format!("{} ms", fixed(e2e_p99, 1)),
            "-",
            "<= 45 ms",
        ),
        (
            "batch p95 while catching up 60 s",
            format!("{} ms", fixed(catch_up_batch_p95, 1)),
            "<= 45 ms",
            "<= 20 ms",
        ),
        (
            "catch-up of a 60 s backlog",
            format!("{} s", fixed(catch_up, 1)),
            "< 60 s",
            "<= 5 s",
        ),
        (
            "max throughput, batches of 100",
            format!("{}/s", grouped(max, 0)),
            ">= 5,000/s",
            ">= 25,000/s",
        ),
        (
            "vs per-record baseline",
            format!("{}x ({}/s)", fixed(ratio, 1), grouped(per_record_eps, 0)),
            ">= 5x",
            ">= 15x",
        ),
        (
            "db-only ceiling / pipeline share",
            format!(
                "{}/s / {}",
                grouped(ceiling_eps, 0),
                percent(max / ceiling_eps)
            ),
            "-",
            "-",
        ),
        (
            "floor: the statement's rows written bare",
            format!("{}/s", grouped(floor_eps, 0)),
            "-",
            "-",
        ),
        (
            "ceiling / floor",
            fixed(ceiling_eps / floor_eps, 2),
            ">= 0.5",
            ">= 0.7",
        ),
        (
            "applied twice / lost",
            format!("{doubled} / {lost}"),
            "0 / 0",
            "0 / 0",
        ),
    ];
    let width = rows.iter().map(|row| row.0.len()).max().unwrap_or(0);
    let mut text = format!(
        "\n{:<width$}  {:<26} {:<11} aim\n",
        "figure", "measured", "must"
    );
    for (figure, value, must, aim) in rows {
        text += &format!("{figure:<width$}  {value:<26} {must:<11} {aim}\n");
    }
    text += &format!("\nresults: {results_path}\n");
    Ok(Table { json, text, ok })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::output::tables::fixtures::run_report;

    fn folder(per_record_lost: i64) -> BTreeMap<String, String> {
        let mut spike = run_report(1400.0, [5.0, 9.0, 12.0], 30.0, Some(4.25), 0);
        spike["batch_duration_spike_ms"] =
            json!({"p50": 10.0, "p95": 41.0, "p99": 44.0, "batches": 5});
        [
            (
                "steady",
                run_report(1400.0, [4.0, 12.34, 30.0], 8.0, None, 0),
            ),
            ("lag_spike", spike),
            ("max_batch", run_report(30_000.0, [0.0; 3], 9.0, None, 0)),
            (
                "max_per_record",
                run_report(1_500.0, [0.0; 3], 1.0, None, per_record_lost),
            ),
            ("db_ceiling", json!({"events_per_second": 40_000.0})),
            ("floor", json!({"events_per_second": 50_000.0})),
        ]
        .into_iter()
        .map(|(name, report)| (format!("{name}.json"), report.to_string()))
        .collect()
    }

    #[test]
    fn the_figures_stand_beside_the_must_and_aim() {
        let table = table(&folder(0), "out/results.json").unwrap();
        assert!(table.ok);
        let lines: Vec<&str> = table.text.lines().collect();
        assert_eq!(lines[0], "");
        assert_eq!(
            lines[1],
            "figure                                    measured                   must        aim"
        );
        assert_eq!(
            lines[2],
            "steady 1,400/s, end-to-end p95            12.3 ms                    <= 45 ms    <= 15 ms"
        );
        assert!(
            lines[4].contains("41.0 ms"),
            "the spike window's batches: {}",
            lines[4]
        );
        assert!(lines[6].contains("30,000/s"));
        assert!(lines[7].contains("20.0x (1,500/s)"));
        assert!(lines[8].contains("40,000/s / 75%"));
        assert!(lines[10].contains("0.80 "));
        assert_eq!(*lines.last().unwrap(), "results: out/results.json");
        assert_eq!(table.json["batch_vs_per_record"], json!(20.0));
        assert_eq!(
            table.json["reports"]["floor"]["events_per_second"],
            json!(50_000.0)
        );
    }

    #[test]
    fn a_run_that_lost_events_fails_the_table() {
        let table = table(&folder(3), "out/results.json").unwrap();
        assert!(!table.ok);
        assert_eq!(table.json["lost_events"], json!(3));
        assert!(table.text.contains("0 / 3 "));
    }

    #[test]
    fn without_a_spike_window_the_whole_run_counts() {
        let report = json!({"batch_duration_spike_ms": null, "batch_duration_ms": {"p95": 7.0}});
        assert_eq!(spike_batch(&report)["p95"], json!(7.0));
    }

    #[test]
    fn a_missing_report_is_named() {
        let mut files = folder(0);
        files.remove("floor.json");
        let error = table(&files, "out/results.json").unwrap_err();
        assert_eq!(error.to_string(), "floor.json: no such file");
    }
}
