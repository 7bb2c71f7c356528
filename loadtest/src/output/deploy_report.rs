//! What a deploy run found, per variant and phase: the actions on the
//! group, the end-to-end latency over the whole phase and over the
//! disruption's window, and the reconciliation; a line per phase while it
//! runs, a Markdown table at the end, and the JSON report.

use crate::verdict::latency::Quantiles;
use crate::verdict::reconcile::Reconciliation;

/// One action on the group (a member restarted, started or stopped).
#[derive(Debug, Clone)]
pub struct Action {
    pub what: String,
    /// Seconds into the phase when it began.
    pub at_s: f64,
    /// SIGTERM → exit.
    pub stopped_in_s: Option<f64>,
    /// Start → `/readyz` 200.
    pub ready_in_s: Option<f64>,
    /// The whole action (a restart: SIGTERM → the new process ready).
    pub took_s: f64,
}

/// One phase of one variant.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub variant: String,
    pub round: usize,
    pub phase: &'static str,
    /// The roll's pod-start gap.
    pub gap_s: Option<f64>,
    pub events: u64,
    pub duplicates_sent: u64,
    /// After the warm-up, the whole phase.
    pub whole: Option<Quantiles>,
    /// Events sent within the disruption's window.
    pub window: Option<Quantiles>,
    /// The window, in seconds into the phase.
    pub window_s: Option<(f64, f64)>,
    pub actions: Vec<Action>,
    /// Per second of the phase (by send time): events, slowest in ms.
    pub seconds: Vec<(i64, u64, f64)>,
    pub drained: bool,
    pub reconciliation: Reconciliation,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.drained && self.reconciliation.ok
    }

    fn name(&self) -> String {
        match self.gap_s {
            Some(gap) => format!("{} (gap {gap} s)", self.phase),
            None => self.phase.to_owned(),
        }
    }

    /// The line printed as each phase ends.
    pub fn row(&self) -> String {
        format!(
            "{} round {} {}: whole {}; window {}; {}",
            self.variant,
            self.round,
            self.name(),
            cells(self.whole.as_ref()),
            cells(self.window.as_ref()),
            self.verdict()
        )
    }

    fn verdict(&self) -> String {
        let r = &self.reconciliation;
        format!(
            "{} (lost {}, applied twice {}{})",
            if self.ok() { "reconciled" } else { "FAILED" },
            r.lost_events,
            r.doubled_events,
            if self.drained { "" } else { ", not drained" }
        )
    }

    /// The Markdown table of a run.
    pub fn table(outcomes: &[Outcome]) -> String {
        let mut table = String::from(
            "| variant | round | phase | events | whole p50 / p95 / p99 / max ms | window p50 / p95 / p99 / max ms | slowest action | reconciled |\n|---|---|---|---|---|---|---|---|\n",
        );
        for outcome in outcomes {
            let slowest = outcome
                .actions
                .iter()
                .max_by(|a, b| a.took_s.total_cmp(&b.took_s))
                .map(|a| format!("{} {:.2} s", a.what, a.took_s))
                .unwrap_or_else(|| "—".to_owned());
            table.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                outcome.variant,
                outcome.round,
                outcome.name(),
                outcome.events,
                cells(outcome.whole.as_ref()),
                cells(outcome.window.as_ref()),
                slowest,
                outcome.verdict()
            ));
        }
        table
    }

    pub fn to_json(&self) -> serde_json::Value {
        let r = &self.reconciliation;
        serde_json::json!({
            "variant": self.variant,
            "round": self.round,
            "phase": self.phase,
            "gap_s": self.gap_s,
            "events_sent": self.events,
            "duplicates_sent": self.duplicates_sent,
            "e2e_latency_ms": self.whole.as_ref().map(quantiles_json),
            "e2e_latency_window_ms": self.window.as_ref().map(quantiles_json),
            "window_s": self.window_s.map(|(from, to)| serde_json::json!({"from": from, "to": to})),
            "actions": self.actions.iter().map(|a| serde_json::json!({
                "what": a.what,
                "at_s": a.at_s,
                "stopped_in_s": a.stopped_in_s,
                "ready_in_s": a.ready_in_s,
                "took_s": a.took_s,
            })).collect::<Vec<_>>(),
            "max_ms_per_second": self.seconds.iter().map(|(second, count, max)| serde_json::json!([second, count, max])).collect::<Vec<_>>(),
            "drained": self.drained,
            "reconciliation": {
                "ok": r.ok,
                "mismatched_skus": r.mismatched_skus,
                "lost_events": r.lost_events,
                "doubled_events": r.doubled_events,
            },
        })
    }
}

fn cells(quantiles: Option<&Quantiles>) -> String {
    match quantiles {
        Some(q) => format!("{:.1} / {:.1} / {:.1} / {:.1}", q.p50, q.p95, q.p99, q.max),
        None => "—".to_owned(),
    }
}

fn quantiles_json(q: &Quantiles) -> serde_json::Value {
    serde_json::json!({"p50": q.p50, "p95": q.p95, "p99": q.p99, "max": q.max, "count": q.count})
}
