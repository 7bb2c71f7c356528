//! `make explore` (scripts/explore.sh): one row per seed, from the seed's
//! folder: its `report.json` (absent when the run failed before writing
//! it) and `result.txt`, the script's verdict on its first line and the
//! seconds it took on the second. Verdict: every seed `ok`.

use anyhow::{anyhow, Result};
use serde_json::{json, Value};

use super::{at, Files, Table};

/// How the seeds were run, for the table's first line.
#[derive(Debug, Clone)]
pub struct Run {
    /// The day, `YYYY-MM-DD`.
    pub date: String,
    pub seconds: u64,
    pub rate: u64,
    pub brokers: u64,
}

/// The table of `seeds`, each read from `folder(seed)`.
pub fn table<F: Files>(run: &Run, seeds: &[(String, F)]) -> Result<Table> {
    let mut text = format!(
        "`make explore` of {} ({} s at {}/s per seed, {} broker(s)):\n\n",
        run.date, run.seconds, run.rate, run.brokers
    );
    text.push_str("| seed | group | faults | of which | records | events applied | member restarts | differences | result | time |\n");
    text.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    let mut rows = Vec::new();
    let mut ok = true;
    for (seed, files) in seeds {
        let outcome = files.required("result.txt")?;
        let mut lines = outcome.lines();
        let result = lines.next().unwrap_or_default().to_owned();
        let took = lines
            .next()
            .ok_or_else(|| anyhow!("{seed}/result.txt: no second line (the seconds)"))?
            .trim()
            .to_owned();
        ok &= result == "ok";
        let report = files
            .text("report.json")?
            .and_then(|text| serde_json::from_str::<Value>(&text).ok());
        text.push_str(&row(seed, report.as_ref(), &result, &took));
        rows.push(json!({ "seed": seed, "result": result, "seconds": took, "report": report }));
    }
    Ok(Table {
        json: json!({ "seeds": rows }),
        text,
        ok,
    })
}

/// A seed's row; its figures blank when it wrote no report.
fn row(seed: &str, report: Option<&Value>, result: &str, took: &str) -> String {
    let Some(r) = report else {
        return format!("| {seed} | | | | | | | {result} | {took} s |\n");
    };
    let count = |key: &str| at(r, &[key]).as_array().map_or(0, Vec::len);
    let faults = at(r, &["fault_counts"])
        .as_object()
        .map(|counts| {
            counts
                .iter()
                .map(|(kind, n)| format!("{kind} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let membership = if at(r, &["static_members"]).as_bool() == Some(true) {
        "static"
    } else {
        "dynamic"
    };
    let plain = |key: &str| match at(r, &[key]) {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    format!(
        "| {seed} | {}, {} {membership} | {} | {faults} | {} | {} | {} | {} | {result} | {took} s |\n",
        plain("protocol"),
        plain("members"),
        count("faults"),
        plain("records"),
        plain("applied"),
        count("member_restarts"),
        count("differences"),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn folder(files: &[(&str, &str)]) -> BTreeMap<String, String> {
        files
            .iter()
            .map(|(name, text)| (name.to_string(), text.to_string()))
            .collect()
    }

    fn run() -> Run {
        Run {
            date: "2026-12-07".into(),
            seconds: 30,
            rate: 150,
            brokers: 1,
        }
    }

    #[test]
    fn a_seed_with_its_report_fills_its_row() {
        let report = r#"{"protocol": "classic", "members": 3, "static_members": false,
            "faults": [1, 2, 3], "fault_counts": {"kill": 2, "freeze": 1},
            "records": 4500, "applied": 4300, "member_restarts": [1], "differences": []}"#;
        let seeds = vec![(
            "9".to_owned(),
            folder(&[("result.txt", "ok\n41\n"), ("report.json", report)]),
        )];
        let table = table(&run(), &seeds).unwrap();
        assert!(table.ok);
        assert!(table
            .text
            .starts_with("`make explore` of 2026-12-07 (30 s at 150/s per seed, 1 broker(s)):"));
        assert!(table.text.ends_with(
            "| 9 | classic, 3 dynamic | 3 | freeze 1, kill 2 | 4500 | 4300 | 1 | 0 | ok | 41 s |\n"
        ));
    }

    #[test]
    fn a_seed_without_a_report_has_a_blank_row_and_fails_the_table() {
        let seeds = vec![
            ("1".to_owned(), folder(&[("result.txt", "ok\n40\n")])),
            (
                "2".to_owned(),
                folder(&[(
                    "result.txt",
                    "FAILED (the database pair did not start)\n3\n",
                )]),
            ),
        ];
        let table = table(&run(), &seeds).unwrap();
        assert!(!table.ok);
        assert!(table
            .text
            .ends_with("| 2 | | | | | | | FAILED (the database pair did not start) | 3 s |\n"));
    }

    #[test]
    fn a_seed_without_its_result_is_an_error_naming_it() {
        let seeds = vec![("5".to_owned(), folder(&[]))];
        let error = table(&run(), &seeds).unwrap_err().to_string();
        assert_eq!(error, "result.txt: no such file");
    }
}
