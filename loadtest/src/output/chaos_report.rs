//! What a chaos run found, per scenario: the faults and the group's
//! recovery from each, and the reconciliation; as a line per scenario while
//! it runs, a Markdown table at the end, and the JSON report.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::verdict::reconcile::Reconciliation;

/// One fault and how long the group took to recover from it.
#[derive(Debug, Clone)]
pub struct Fault {
    pub what: String,
    /// From the fault until it was repaired (the outage).
    pub repaired_in: Duration,
    /// From the fault until everything sent before the repair was committed.
    pub recovered_in: Duration,
}

/// What one scenario sent, suffered and left in the database.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The scenario's name, as on the command line.
    pub scenario: &'static str,
    pub events: u64,
    pub duplicates_sent: u64,
    /// Records already on the topic that the scenario's group read again.
    pub replayed: i64,
    pub faults: Vec<Fault>,
    pub drained: bool,
    pub reconciliation: Reconciliation,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.drained && self.reconciliation.ok
    }

    fn worst_recovery(&self) -> Option<&Fault> {
        self.faults.iter().max_by_key(|f| f.recovered_in)
    }
}

const HEADER: [&str; 9] = [
    "scenario",
    "events",
    "duplicates sent",
    "replayed",
    "applied twice",
    "lost",
    "reconciled",
    "time to recover; its outage (worst fault)",
    "faults",
];

fn cells(outcome: &Outcome) -> [String; 9] {
    let recovery = match outcome.worst_recovery() {
        Some(worst) => format!(
            "{:.1} s; {:.1} s",
            worst.recovered_in.as_secs_f64(),
            worst.repaired_in.as_secs_f64()
        ),
        None => "-".to_owned(),
    };
    [
        outcome.scenario.to_owned(),
        outcome.events.to_string(),
        outcome.duplicates_sent.to_string(),
        outcome.replayed.to_string(),
        outcome.reconciliation.doubled_events.to_string(),
        outcome.reconciliation.lost_events.to_string(),
        if outcome.ok() { "yes" } else { "NO" }.to_owned(),
        recovery,
        outcome.faults.len().to_string(),
    ]
}

/// One scenario as a line, for the log as it goes.
pub fn row(outcome: &Outcome) -> String {
    HEADER
        .iter()
        .zip(cells(outcome))
        .map(|(name, cell)| format!("{name}: {cell}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The run as a Markdown table.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut lines = vec![
        format!("| {} |", HEADER.join(" | ")),
        format!("|{}", "---|".repeat(HEADER.len())),
    ];
    lines.extend(
        outcomes
            .iter()
            .map(|outcome| format!("| {} |", cells(outcome).join(" | "))),
    );
    lines.join("\n")
}

/// The run as the JSON report of `--report`.
pub fn to_json(
    topic: &str,
    rate: f64,
    scenario_seconds: f64,
    seed: u64,
    outcomes: &[Outcome],
) -> serde_json::Value {
    let scenarios: Vec<serde_json::Value> = outcomes
        .iter()
        .map(|o| {
            let r = &o.reconciliation;
            serde_json::json!({
                "scenario": o.scenario,
                "events": o.events,
                "duplicates_sent": o.duplicates_sent,
                "replayed": o.replayed,
                "applied_twice": r.doubled_events,
                "lost": r.lost_events,
                "reconciled": o.ok(),
                "ledger_rows_delta": r.ledger_rows_delta,
                "expected_ledger_rows": r.expected_ledger_rows,
                "parked_rows_delta": r.parked_rows_delta,
                "expected_parked_rows": r.expected_parked_rows,
                "parked_reason_differences": r.parked_reason_differences
                    .iter()
                    .map(|(k, (parked, sent))| (k.clone(), serde_json::json!({"parked": parked, "sent": sent})))
                    .collect::<BTreeMap<_, _>>(),
                "faults": o.faults.iter().map(|f| serde_json::json!({
                    "fault": f.what,
                    "repaired_in_seconds": f.repaired_in.as_secs_f64(),
                    "recovered_in_seconds": f.recovered_in.as_secs_f64(),
                })).collect::<Vec<_>>(),
                "time_to_recover_seconds": o.worst_recovery().map(|f| f.recovered_in.as_secs_f64()),
            })
        })
        .collect();
    serde_json::json!({
        "topic": topic,
        "rate": rate,
        "scenario_seconds": scenario_seconds,
        "seed": seed,
        "ok": outcomes.iter().all(Outcome::ok),
        "scenarios": scenarios,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(doubled: u64, faults: &[f64]) -> Outcome {
        Outcome {
            scenario: "kill-consumer",
            events: 1000,
            duplicates_sent: 50,
            replayed: 0,
            faults: faults
                .iter()
                .map(|s| Fault {
                    what: "kill".into(),
                    repaired_in: Duration::from_secs_f64(s / 4.0),
                    recovered_in: Duration::from_secs_f64(*s),
                })
                .collect(),
            drained: true,
            reconciliation: Reconciliation {
                ok: doubled == 0,
                mismatched_skus: 0,
                over_reserved_skus: 0,
                lost_events: 0,
                doubled_events: doubled,
                ledger_rows_delta: 940,
                expected_ledger_rows: 940,
                parked_rows_delta: 10,
                expected_parked_rows: 10,
                parked_reason_differences: BTreeMap::new(),
            },
        }
    }

    #[test]
    fn the_table_shows_the_worst_recovery_and_the_verdict() {
        let text = table(&[outcome(0, &[1.25, 3.5, 2.0]), outcome(2, &[])]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[2],
            "| kill-consumer | 1000 | 50 | 0 | 0 | 0 | yes | 3.5 s; 0.9 s | 3 |"
        );
        assert_eq!(
            lines[3],
            "| kill-consumer | 1000 | 50 | 0 | 2 | 0 | NO | - | 0 |"
        );
    }

    #[test]
    fn a_scenario_that_did_not_drain_is_not_ok() {
        let mut stalled = outcome(0, &[1.0]);
        stalled.drained = false;
        assert!(!stalled.ok());
        assert!(outcome(0, &[1.0]).ok());
    }
}
