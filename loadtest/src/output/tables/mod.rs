//! The tables of the benchmark scripts (`make bench`, `bench-network`,
//! `bench-scale`, `soak`, `explore`, the floor of `bench-ceiling`): each
//! gathers the JSON reports its script's runs wrote into one JSON file,
//! prints one table, and gives the verdict the
//! script exits with. Pure: the reports come in through [`Files`], the
//! outcome goes out as a [`Table`]; `commands::table` reads and writes.
//!
//! Figures are formatted as the Python scripts these replace formatted
//! them (`{:,.0f}`, `{:.0%}`, `{:g}`, `nan`), so that a table printed today
//! reads like those in docs/benchmarks.md.

pub mod bench;
pub mod explore;
pub mod floor;
pub mod network;
pub mod scale;
pub mod soak;

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use serde_json::Value;

/// The folder of reports a table is made from, by file name: the disk in
/// `commands::table`, a map in the tests.
pub trait Files {
    /// The text of the file `name`, `None` when there is none.
    fn text(&self, name: &str) -> Result<Option<String>>;

    /// The text of a file that must be there.
    fn required(&self, name: &str) -> Result<String> {
        self.text(name)?
            .ok_or_else(|| anyhow!("{name}: no such file"))
    }

    /// A JSON report that must be there.
    fn json(&self, name: &str) -> Result<Value> {
        let text = self.required(name)?;
        serde_json::from_str(&text).with_context(|| format!("{name}: not JSON"))
    }
}

impl Files for PathBuf {
    fn text(&self, name: &str) -> Result<Option<String>> {
        let path = self.join(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
        }
    }
}

/// What a table command found.
#[derive(Debug)]
pub struct Table {
    /// The gathered figures, written beside the reports.
    pub json: Value,
    /// What is printed, the last line ending in a newline.
    pub text: String,
    /// The verdict: false makes the command exit 1.
    pub ok: bool,
}

/// The number at `path` in a report; an error naming it when it is missing
/// or not a number (the Python scripts stopped there too).
pub fn number(report: &Value, name: &str, path: &[&str]) -> Result<f64> {
    at(report, path)
        .as_f64()
        .ok_or_else(|| anyhow!("{name}: {} is not a number", path.join(".")))
}

/// The value at `path`, `Null` when any step is missing.
pub fn at<'a>(report: &'a Value, path: &[&str]) -> &'a Value {
    path.iter()
        .try_fold(report, |value, key| value.get(key))
        .unwrap_or(&Value::Null)
}

/// The `ok` of a report's reconciliation, false when it has none.
pub fn reconciled(report: &Value) -> bool {
    at(report, &["reconciliation", "ok"]).as_bool() == Some(true)
}

/// The sum of a reconciliation counter over reports.
pub fn reconciliation_sum(reports: &[&Value], counter: &str) -> i64 {
    reports
        .iter()
        .map(|r| at(r, &["reconciliation", counter]).as_i64().unwrap_or(0))
        .sum()
}

/// `{:.Nf}`: fixed decimals, `nan`/`inf` spelled as Python spells them.
pub fn fixed(value: f64, decimals: usize) -> String {
    if value.is_nan() {
        "nan".to_owned()
    } else if value.is_infinite() {
        if value > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else {
        format!("{value:.decimals$}")
    }
}

/// `{:,.Nf}`: fixed decimals, thousands grouped by commas.
pub fn grouped(value: f64, decimals: usize) -> String {
    let text = fixed(value, decimals);
    if !value.is_finite() {
        return text;
    }
    let (sign, unsigned) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text.as_str()),
    };
    let (whole, fraction) = match unsigned.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (unsigned, None),
    };
    let mut out = String::from(sign);
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    if let Some(fraction) = fraction {
        out.push('.');
        out.push_str(fraction);
    }
    out
}

/// `{:,}` of an integer.
pub fn grouped_int(value: i64) -> String {
    grouped(value as f64, 0)
}

/// `{:.0%}`.
pub fn percent(value: f64) -> String {
    format!("{}%", fixed(value * 100.0, 0))
}

/// `{:g}`: six significant digits, trailing zeros dropped, the exponent
/// form below 1e-4 and from 1e6.
pub fn general(value: f64) -> String {
    if !value.is_finite() {
        return fixed(value, 0);
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let scientific = format!("{value:.5e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("`{:e}` writes an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` writes an integer exponent");
    let trim = |digits: &str| {
        if digits.contains('.') {
            digits
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_owned()
        } else {
            digits.to_owned()
        }
    };
    if (-4..6).contains(&exponent) {
        trim(&format!("{value:.*}", (5 - exponent) as usize))
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exponent.abs())
    }
}

/// A JSON value as Python's `str()` printed it: integers bare, `None` for
/// null.
pub fn shown(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
pub mod fixtures {
    //! Folders of reports held in memory.

    use std::collections::BTreeMap;

    use anyhow::Result;
    use serde_json::{json, Value};

    use super::Files;

    impl Files for BTreeMap<String, String> {
        fn text(&self, name: &str) -> Result<Option<String>> {
            Ok(self.get(name).cloned())
        }
    }

    /// A `run` report with the keys the tables read.
    pub fn run_report(
        throughput: f64,
        e2e: [f64; 3],
        batch_p95: f64,
        catch_up: Option<f64>,
        lost: i64,
    ) -> Value {
        json!({
            "throughput_eps": throughput,
            "e2e_latency_ms": {"p50": e2e[0], "p95": e2e[1], "p99": e2e[2], "max": e2e[2], "events": 100},
            "batch_duration_ms": {"p50": batch_p95 / 2.0, "p95": batch_p95, "p99": batch_p95, "batches": 10},
            "produce_ack_ms": {"p50": 1.0, "p95": 2.0, "p99": 3.0, "max": 4.0, "events": 100},
            "catch_up_seconds": catch_up,
            "reconciliation": {"ok": lost == 0, "lost_events": lost, "doubled_events": 0},
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_formatted_as_python_formats_them() {
        assert_eq!(grouped(1234567.4, 0), "1,234,567");
        assert_eq!(grouped(-1234.56, 1), "-1,234.6");
        assert_eq!(grouped(999.5, 0), "1,000");
        assert_eq!(grouped(12.0, 0), "12");
        assert_eq!(grouped_int(1_000), "1,000");
        assert_eq!(percent(0.736), "74%");
        assert_eq!(fixed(f64::NAN, 1), "nan");
        assert_eq!(fixed(0.25, 1), "0.2");
        assert_eq!(general(2.0), "2");
        assert_eq!(general(1.5), "1.5");
        assert_eq!(general(0.333_333_33), "0.333333");
        assert_eq!(general(1_234_567.0), "1.23457e+06");
        assert_eq!(general(0.000_01), "1e-05");
        assert_eq!(general(0.0), "0");
        assert_eq!(general(100_000.0), "100000");
    }

    #[test]
    fn a_missing_number_is_an_error_naming_it() {
        let report = serde_json::json!({"e2e_latency_ms": {"p95": null}});
        let error = number(&report, "steady.json", &["e2e_latency_ms", "p95"]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "steady.json: e2e_latency_ms.p95 is not a number"
        );
        assert_eq!(at(&report, &["nothing", "here"]), &Value::Null);
    }
}
