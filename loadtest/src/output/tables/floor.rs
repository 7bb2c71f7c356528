//! The floor of `make bench-ceiling` (scripts/bench-ceiling.sh): the
//! transactions per second pgbench gave for the floor's batches of 100
//! (`floor.pgbench.txt`) as events per second into `floor.json`, beside
//! the database-only ceiling of the same run (`db_ceiling.json`) and
//! their ratio. No verdict: the script checked the rows written.

use anyhow::{anyhow, Result};
use serde_json::json;

use super::{fixed, grouped, number, Files, Table};

/// Events a floor transaction writes (scripts/bench/floor.sql).
pub const BATCH_SIZE: u64 = 100;

pub fn table(files: &dyn Files, batches: u64) -> Result<Table> {
    let pgbench = files.required("floor.pgbench.txt")?;
    let tps: f64 = pgbench
        .lines()
        .find_map(|line| line.trim().strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|figure| figure.parse().ok())
        .ok_or_else(|| anyhow!("floor.pgbench.txt: no `tps = ` line"))?;
    let floor = tps * BATCH_SIZE as f64;
    let ceiling = number(
        &files.json("db_ceiling.json")?,
        "db_ceiling.json",
        &["events_per_second"],
    )?;
    Ok(Table {
        json: json!({
            "events": batches * BATCH_SIZE,
            "batch_size": BATCH_SIZE,
            "events_per_second": floor,
            "source": "scripts/bench/floor.sql, pgbench -M prepared -c 1",
        }),
        text: format!(
            "floor: {} events/s; ceiling / floor: {}\n",
            grouped(floor, 0),
            fixed(ceiling / floor, 2)
        ),
        ok: true,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn the_floor_is_pgbench_tps_times_the_batch_beside_the_ceiling() {
        let files: BTreeMap<String, String> = [
            (
                "floor.pgbench.txt",
                "number of transactions actually processed: 600/600\n\
                 latency average = 3.481 ms\n\
                 tps = 287.287651 (without initial connection time)\n",
            ),
            ("db_ceiling.json", r#"{"events_per_second": 14759.2}"#),
        ]
        .into_iter()
        .map(|(name, text)| (name.to_owned(), text.to_owned()))
        .collect();
        let table = table(&files, 600).unwrap();
        assert_eq!(
            table.text,
            "floor: 28,729 events/s; ceiling / floor: 0.51\n"
        );
        assert_eq!(table.json["events"], 60000);
        let floor = table.json["events_per_second"].as_f64().unwrap();
        assert!((floor - 28_728.765_1).abs() < 1e-6, "{floor}");
    }

    #[test]
    fn output_without_tps_is_an_error_naming_the_file() {
        let files: BTreeMap<String, String> = [(
            "floor.pgbench.txt".to_owned(),
            "connection refused\n".to_owned(),
        )]
        .into();
        let error = table(&files, 600).unwrap_err().to_string();
        assert_eq!(error, "floor.pgbench.txt: no `tps = ` line");
    }
}
