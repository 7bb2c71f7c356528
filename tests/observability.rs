//! The observability kit of docs/design.md#observability against the real thing: a consumer under
//! a short load that moves every metric family; its live `/metrics` linted by
//! `promtool check metrics`; `dashboards/alerts.yml` and
//! `dashboards/prometheus.yml` checked by promtool; and a real Prometheus
//! (Debian's `prometheus` package, installed by `scripts/test-deps.sh`)
//! scraping the consumer every second, in which every query of
//! `dashboards/inventory-inbox.json` and every alert rule must return data.
//!
//! How the queries are evaluated, through Prometheus's HTTP API:
//! - Dashboard targets: Grafana's variables are replaced by concrete values
//!   (`$__rate_interval` 10s, `$__interval` 5s, `$__range` 1m, `$instance`
//!   `.*`); the `instance` variable's own `label_values` query is asked of
//!   the label-values API.
//! - Alert rules are taken from `/api/v1/rules`, i.e. as this Prometheus
//!   loaded them from the file. A rule is a condition (`… > 0.045`) that is
//!   empty while the service is healthy, so each is evaluated with `bool`
//!   after every comparison (`… > bool 0.045`): the same series, answering
//!   0 or 1 instead of filtering. The rules must also evaluate without
//!   error, and `InboxRecordsParked` must really fire, as the load parks
//!   records.
//!
//! The load (about 100 records/s on 4 partitions) carries fresh orders,
//! exact redeliveries, business duplicates, malformed JSON, orders of an
//! unknown SKU and orders a scarce SKU cannot serve; a short refusal of new
//! database connections (CONNECTION LIMIT 0 and the consumer's sessions
//! terminated) makes the consumer retry a batch. Missing Prometheus binaries
//! FAIL the test, with the command that installs them.

mod common;

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

const PROMETHEUS: &str = "/usr/bin/prometheus";
const PROMTOOL: &str = "/usr/bin/promtool";
const PARTITIONS: i32 = 4;
const SKUS: [&str; 4] = ["SKU-OBS-1", "SKU-OBS-2", "SKU-OBS-3", "SKU-OBS-4"];
/// One unit on hand: every order of 5 is rejected.
const SCARCE_SKU: &str = "SKU-OBS-SCARCE";
/// Not in `inventory_stock`: parked as `unknown_sku`.
const UNKNOWN_SKU: &str = "SKU-OBS-NOWHERE";
const TICK: Duration = Duration::from_millis(100);
const FRESH_ORDERS_PER_TICK: usize = 8;
/// Grafana's variables, as the queries are evaluated here.
const GRAFANA_VARIABLES: [(&str, &str); 4] = [
    // Grafana's is at least four scrape intervals; Prometheus scrapes every
    // second here.
    ("$__rate_interval", "10s"),
    ("$__interval", "5s"),
    ("$__range", "1m"),
    ("$instance", ".*"),
];
/// Returns data once the consumer processes at a pace again.
const STEADY_PACE: &str = "sum(rate(inbox_processed_total[10s])) > 40";
/// How long every query together may take to return data.
const QUERY_DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_and_alert_queries_return_data_from_a_live_consumer() {
    let started = Instant::now();
    require_prometheus();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(dashboards().join("inventory-inbox.json"))
            .expect("read dashboards/inventory-inbox.json"),
    )
    .expect("the dashboard is JSON");
    let dashboard_queries = dashboard_queries(&dashboard);
    promtool(
        &[
            "check",
            "rules",
            &path_str(&dashboards().join("alerts.yml")),
        ],
        "",
    );

    let db = TestDb::new().await;
    let mut stock: Vec<(&str, i64)> = SKUS.iter().map(|sku| (*sku, 1_000_000_000)).collect();
    stock.push((SCARCE_SKU, 1));
    db.seed_stock(&stock).await;
    let topic = fresh_topic(PARTITIONS).await;
    let mut spec = ConsumerSpec::new(&db, &topic);
    // Metrics are the subject here, not privileges: the consumer runs as the
    // owner role, whose sessions the test may end (`provoke_db_retry`).
    spec.database_url = db.url.clone();
    let consumer = spec.start();
    eprintln!("consumer log: {}", consumer.log.display());

    let prometheus = Prometheus::start(consumer.metrics_port);
    eprintln!("prometheus log: {}", prometheus.log.display());

    wait_until(Duration::from_secs(30), "the consumer is ready", || async {
        matches!(consumer.get("/readyz").await, Some((200, _)))
    })
    .await;
    let stop_load = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn(produce_load(topic.clone(), stop_load.clone()));

    wait_until(
        Duration::from_secs(20),
        "Prometheus scrapes the consumer (target up)",
        || async { prometheus.target_is_up().await },
    )
    .await;
    provoke_db_retry(&db, &consumer).await;
    let families = every_family_moved(&consumer).await;
    eprintln!(
        "metric families moved after {:?}: {families}",
        started.elapsed()
    );
    // Evaluate once the rate windows show the consumer processing again
    // (draining what piled up during the refusal, then at the load's pace
    // of about 80 fresh events/s), not only the retry's stall.
    prometheus
        .query_until_data(STEADY_PACE, Instant::now() + Duration::from_secs(30))
        .await
        .unwrap_or_else(|why| panic!("the consumer did not get back to pace: {why}"));

    let body = consumer.get("/metrics").await.expect("GET /metrics").1;
    promtool(&["check", "metrics"], &body);

    let mut failures = Vec::new();
    let deadline = Instant::now() + QUERY_DEADLINE;
    for (panel, expr) in &dashboard_queries {
        let query = grafana_to_promql(expr);
        match prometheus.query_until_data(&query, deadline).await {
            Ok(answer) => eprintln!("ok  panel {panel:?}: {query}\n      -> {answer}"),
            Err(why) => failures.push(format!("panel {panel:?}: {query}\n    {why}")),
        }
    }
    for (name, label, metric) in template_label_queries(&dashboard) {
        let path = format!(
            "/api/v1/label/{label}/values?match[]={}",
            percent_encode(&metric)
        );
        let values = prometheus.api(&path).await;
        if values.as_array().is_none_or(|v| v.is_empty()) {
            failures.push(format!(
                "variable {name:?}: label_values({metric}, {label}) is empty: {values}"
            ));
        } else {
            eprintln!("ok  variable {name:?}: label_values({metric}, {label}) -> {values}");
        }
    }
    let rules = prometheus.alert_rules(deadline).await;
    assert_eq!(
        rules.len(),
        count_alert_rules(&dashboards().join("alerts.yml")),
        "every rule of dashboards/alerts.yml is loaded: {rules:?}"
    );
    for (name, expr) in &rules {
        let query = with_bool(expr);
        match prometheus.query_until_data(&query, deadline).await {
            Ok(answer) => eprintln!("ok  alert {name}: {query}\n      -> {answer}"),
            Err(why) => failures.push(format!("alert {name}: {query}\n    {why}")),
        }
    }
    match prometheus.alert_fires("InboxRecordsParked", deadline).await {
        Ok(()) => eprintln!("ok  alert InboxRecordsParked is firing"),
        Err(why) => failures.push(why),
    }
    assert!(
        failures.is_empty(),
        "{} of {} queries returned no data:\n{}\nprometheus log: {}",
        failures.len(),
        dashboard_queries.len() + rules.len(),
        failures.join("\n"),
        prometheus.log.display()
    );
    eprintln!(
        "{} dashboard queries and {} alert rules returned data after {:?}",
        dashboard_queries.len(),
        rules.len(),
        started.elapsed()
    );

    stop_load.store(true, Ordering::Relaxed);
    load.await.expect("load task");
    consumer.stop().await;
    drop(prometheus);
    eprintln!("done in {:?}", started.elapsed());
}

/// Fails (never skips) without Debian's Prometheus.
fn require_prometheus() {
    for binary in [PROMETHEUS, PROMTOOL] {
        assert!(
            Path::new(binary).exists(),
            "{binary} is missing: run `scripts/test-deps.sh` (installs Debian's `prometheus` package; `make test` does)"
        );
    }
}

fn dashboards() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards")
}

fn path_str(path: &Path) -> String {
    path.to_str().expect("UTF-8 path").to_owned()
}

/// Runs promtool with `stdin`; panics with its output unless it succeeds.
fn promtool(args: &[&str], stdin: &str) {
    let mut child = Command::new(PROMTOOL)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write to promtool");
    let output = child.wait_with_output().expect("promtool");
    assert!(
        output.status.success(),
        "promtool {} failed ({}):\n{}{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// (panel title, expr) of every target of every panel, rows' panels
/// included; asserts the datasource rules an importable dashboard needs:
/// the `datasource` variable, used by every panel and target, no fixed UID.
fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    assert!(
        dashboard["schemaVersion"].as_i64().unwrap_or(0) >= 36,
        "a current Grafana schema"
    );
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating");
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a `datasource` variable of type datasource, query prometheus"
    );
    let variable_source = serde_json::json!({"type": "prometheus", "uid": "${datasource}"});
    // Rows hold their panels in `panels` when collapsed (one level only).
    let panels = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|panel| match panel["type"].as_str() {
            Some("row") => panel["panels"].as_array().cloned().unwrap_or_default(),
            _ => vec![panel.clone()],
        });
    let mut queries = Vec::new();
    for panel in panels {
        let title = panel["title"].as_str().unwrap_or("?").to_owned();
        assert_eq!(panel["datasource"], variable_source, "panel {title:?}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {title:?} has no query");
        for target in targets {
            assert_eq!(
                target["datasource"], variable_source,
                "a target of {title:?}"
            );
            let expr = target["expr"].as_str().expect("expr");
            assert!(!expr.trim().is_empty(), "an empty query in {title:?}");
            queries.push((title.clone(), expr.to_owned()));
        }
    }
    for variable in variables.iter().filter(|v| v["type"] == "query") {
        assert_eq!(
            variable["datasource"], variable_source,
            "variable {}",
            variable["name"]
        );
    }
    queries
}

/// (variable, label, metric) of every `label_values(metric, label)` query
/// variable; other query forms fail, so a new one gets evaluated too.
fn template_label_queries(dashboard: &Value) -> Vec<(String, String, String)> {
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating");
    variables
        .iter()
        .filter(|v| v["type"] == "query")
        .map(|variable| {
            let name = variable["name"].as_str().unwrap_or("?").to_owned();
            let definition = variable["definition"].as_str().unwrap_or("");
            let arguments = definition
                .strip_prefix("label_values(")
                .and_then(|rest| rest.strip_suffix(')'))
                .unwrap_or_else(|| panic!("variable {name:?}: unsupported query {definition:?}"));
            let (metric, label) = arguments.split_once(',').unwrap_or_else(|| {
                panic!("variable {name:?}: label_values(metric, label) expected")
            });
            (name, label.trim().to_owned(), metric.trim().to_owned())
        })
        .collect()
}

/// The query with Grafana's variables replaced; none may remain.
fn grafana_to_promql(expr: &str) -> String {
    let query = GRAFANA_VARIABLES
        .iter()
        .fold(expr.to_owned(), |query, (variable, value)| {
            query.replace(variable, value)
        });
    assert!(
        !query.contains('$'),
        "a Grafana variable this test does not know: {expr}"
    );
    query
}

/// `bool` after every comparison operator outside label matchers and
/// strings: `a > 0.045` becomes `a > bool 0.045`, which returns the series
/// of `a` with 0 or 1 instead of filtering them out.
fn with_bool(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len() + 16);
    let mut chars = expr.chars().peekable();
    let (mut braces, mut quote) = (0u32, None::<char>);
    while let Some(c) = chars.next() {
        out.push(c);
        if let Some(q) = quote {
            if c == '\\' {
                out.extend(chars.next());
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' | '`' => quote = Some(c),
            '{' => braces += 1,
            '}' => braces = braces.saturating_sub(1),
            '>' | '<' | '=' | '!' if braces == 0 => {
                let comparison = match (c, chars.peek()) {
                    ('=', Some('=')) | ('!', Some('=')) | ('>', Some('=')) | ('<', Some('=')) => {
                        out.extend(chars.next());
                        true
                    }
                    ('>', _) | ('<', _) => true,
                    _ => false,
                };
                let rest: String = chars.clone().collect();
                if comparison && !rest.trim_start().starts_with("bool") {
                    out.push_str(" bool");
                }
            }
            _ => {}
        }
    }
    out
}

#[tokio::test]
async fn every_counter_and_histogram_is_exposed_from_the_first_scrape() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    let consumer = ConsumerSpec::new(&db, &topic).start();
    // The first answer of /metrics, before any record or retry.
    let body = consumer.metrics_text().await;
    let mut missing = Vec::new();
    for series in [
        "inbox_processed_total",
        "inbox_duplicate_ignored_total",
        "inbox_business_duplicate_total",
        "inbox_offset_commit_failures_total",
        "inbox_id_conflict_total",
        "inbox_batch_size_count",
        "inbox_batch_duration_seconds_count",
        "inbox_end_to_end_latency_seconds_count",
        r#"inventory_reservation_lines_total{status="reserved"}"#,
        r#"inventory_reservation_lines_total{status="rejected"}"#,
        r#"inbox_rebalances_total{kind="assign"}"#,
        r#"inbox_rebalances_total{kind="revoke"}"#,
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(
        inventory_inbox::event::ParkReason::ALL
            .iter()
            .map(|reason| format!(r#"inbox_parked_total{{reason="{}"}}"#, reason.as_str())),
    )
    .chain(
        inventory_inbox::store::RetryReason::ALL
            .iter()
            .map(|reason| format!(r#"inbox_db_retries_total{{reason="{reason}"}}"#)),
    ) {
        if series_value(&body, &series).is_none() {
            missing.push(series);
        }
    }
    assert!(
        missing.is_empty(),
        "not exposed at first: {missing:?}\n{body}"
    );
    consumer.stop().await;
}

#[test]
fn every_alert_fires_under_its_condition_and_not_without() {
    require_prometheus();
    // dashboards/alerts_test.yml feeds each alert the series of its
    // condition and of its absence; promtool evaluates the rules over them.
    let tests = dashboards().join("alerts_test.yml");
    let output = Command::new(PROMTOOL)
        .args(["test", "rules", &path_str(&tests)])
        .output()
        .expect("run promtool test rules");
    assert!(
        output.status.success(),
        "promtool test rules failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // Every alert of alerts.yml is expected to fire somewhere in the tests.
    let alerts = std::fs::read_to_string(dashboards().join("alerts.yml")).expect("alerts.yml");
    let cases = std::fs::read_to_string(&tests).expect("alerts_test.yml");
    let names: Vec<&str> = alerts
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("- alert:"))
        .map(str::trim)
        .collect();
    assert_eq!(
        names.len(),
        count_alert_rules(&dashboards().join("alerts.yml"))
    );
    for name in names {
        assert!(
            cases.contains(&format!("alertname: {name}\n        exp_alerts:")),
            "alerts_test.yml has no case where {name} fires"
        );
    }
}

/// `- alert:` entries of a rule file.
fn count_alert_rules(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .expect("read alerts.yml")
        .lines()
        .filter(|line| line.trim_start().starts_with("- alert:"))
        .count()
}

/// Percent-encodes all but RFC 3986's unreserved characters.
fn percent_encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len() * 3);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            encoded.push(byte as char);
        } else {
            write!(encoded, "%{byte:02X}").expect("write to a String");
        }
    }
    encoded
}

/// A Prometheus of this test: its own config (copied from
/// dashboards/prometheus.yml, pointed at the test consumer, 1 s intervals),
/// data directory and free port. Killed when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    dir: PathBuf,
    log: PathBuf,
}

impl Prometheus {
    fn start(consumer_port: u16) -> Prometheus {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(unique("prometheus"));
        std::fs::create_dir_all(dir.join("data")).expect("prometheus dir");
        let config = std::fs::read_to_string(dashboards().join("prometheus.yml"))
            .expect("read dashboards/prometheus.yml");
        let config = set_config(
            &config,
            "127.0.0.1:9464",
            &format!("127.0.0.1:{consumer_port}"),
        );
        let config = set_config(&config, "scrape_interval: 5s", "scrape_interval: 1s");
        let config = set_config(
            &config,
            "evaluation_interval: 5s",
            "evaluation_interval: 1s",
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("write config");
        std::fs::copy(dashboards().join("alerts.yml"), dir.join("alerts.yml"))
            .expect("copy alerts");
        let config = path_str(&dir.join("prometheus.yml"));
        promtool(&["check", "config", &config], "");

        let port = free_port();
        let log = dir.join("prometheus.log");
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={config}"))
            .arg(format!(
                "--storage.tsdb.path={}",
                path_str(&dir.join("data"))
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("prometheus log"))
            .spawn()
            .expect("start prometheus");
        Prometheus {
            child,
            port,
            dir,
            log,
        }
    }

    /// The `data` of an API answer; panics unless the status is success.
    async fn api(&self, path: &str) -> Value {
        let (status, body) = http_get(self.port, path)
            .await
            .unwrap_or_else(|| panic!("Prometheus does not answer GET {path}"));
        let answer: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("GET {path}: {status} {e}: {body}"));
        assert_eq!(answer["status"], "success", "GET {path}: {status} {body}");
        answer["data"].clone()
    }

    async fn target_is_up(&self) -> bool {
        let Some((200, body)) = http_get(self.port, "/api/v1/targets?state=active").await else {
            return false;
        };
        let answer: Value = serde_json::from_str(&body).unwrap_or_default();
        answer["data"]["activeTargets"]
            .as_array()
            .is_some_and(|targets| targets.iter().any(|t| t["health"] == "up"))
    }

    /// Evaluates an instant query until it returns a sample with a number
    /// (not NaN: a quantile of nothing is no data on a panel) or the deadline
    /// passes. Ok: how many series, and one value; the error says what it
    /// returned last.
    async fn query_until_data(&self, query: &str, deadline: Instant) -> Result<String, String> {
        let path = format!("/api/v1/query?query={}", percent_encode(query));
        loop {
            let data = self.api(&path).await;
            // Instant queries answer a vector (or a scalar): [time, "value"].
            let samples: Vec<&Value> = match data["resultType"].as_str() {
                Some("vector") => data["result"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|series| &series["value"])
                    .collect(),
                Some("scalar") => vec![&data["result"]],
                _ => vec![],
            };
            let number = samples
                .iter()
                .filter_map(|sample| sample[1].as_str()?.parse::<f64>().ok())
                .find(|value| value.is_finite());
            if let Some(number) = number {
                return Ok(format!("{} series, e.g. {number}", samples.len()));
            }
            if Instant::now() > deadline {
                return Err(format!("no number: {data}"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// (name, query) of every alert rule, once every rule was evaluated
    /// without error.
    async fn alert_rules(&self, deadline: Instant) -> Vec<(String, String)> {
        loop {
            let data = self.api("/api/v1/rules?type=alert").await;
            let rules: Vec<&Value> = data["groups"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|group| group["rules"].as_array().into_iter().flatten())
                .collect();
            let evaluated = rules.iter().all(|rule| rule["health"] != "unknown");
            if evaluated || Instant::now() > deadline {
                for rule in &rules {
                    assert_eq!(rule["health"], "ok", "alert rule evaluation: {rule}");
                }
                return rules
                    .iter()
                    .map(|rule| {
                        (
                            rule["name"].as_str().unwrap_or("?").to_owned(),
                            rule["query"].as_str().expect("rule query").to_owned(),
                        )
                    })
                    .collect();
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn alert_fires(&self, name: &str, deadline: Instant) -> Result<(), String> {
        loop {
            let data = self.api("/api/v1/alerts").await;
            let firing = data["alerts"].as_array().is_some_and(|alerts| {
                alerts
                    .iter()
                    .any(|a| a["labels"]["alertname"] == name && a["state"] == "firing")
            });
            if firing {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("alert {name} is not firing: {data}"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `text` with `from` replaced by `to` in every line that is not a comment;
/// `from` must occur in one at least.
fn set_config(text: &str, from: &str, to: &str) -> String {
    let mut found = false;
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            if line.trim_start().starts_with('#') || !line.contains(from) {
                return line.to_owned();
            }
            found = true;
            line.replace(from, to)
        })
        .collect();
    assert!(found, "dashboards/prometheus.yml should set {from:?}");
    lines.join("\n") + "\n"
}

/// Produces until `stop`: per tick, fresh orders, an exact redelivery of an
/// earlier one, and in turn a business duplicate (new event id, an order
/// line already reserved), malformed JSON, an order of an unknown SKU, and
/// one the scarce SKU cannot serve.
async fn produce_load(topic: String, stop: Arc<AtomicBool>) {
    let producer = producer();
    let mut sent: Vec<Outgoing> = Vec::new();
    let mut next_order = 0usize;
    let mut tick = 0usize;
    let mut ticker = tokio::time::interval(TICK);
    while !stop.load(Ordering::Relaxed) {
        ticker.tick().await;
        let mut records = Vec::new();
        for _ in 0..FRESH_ORDERS_PER_TICK {
            let sku = SKUS[next_order % SKUS.len()];
            let record = Outgoing::event(&order(&format!("ORD-OBS-{next_order}"), &[(sku, 1)]));
            next_order += 1;
            sent.push(record.clone());
            records.push(record);
        }
        records.push(sent[sent.len() / 2].clone());
        let earlier = next_order / 2;
        let special = match tick % 4 {
            0 => Outgoing::event(&order(
                &format!("ORD-OBS-{earlier}"),
                &[(SKUS[earlier % SKUS.len()], 1)],
            )),
            1 => Outgoing::raw("ORD-OBS-POISON", b"{\"event_id\": nope"),
            2 => Outgoing::event(&order(&format!("ORD-OBS-U{tick}"), &[(UNKNOWN_SKU, 1)])),
            _ => Outgoing::event(&order(&format!("ORD-OBS-S{tick}"), &[(SCARCE_SKU, 5)])),
        };
        records.push(special);
        produce(&producer, &topic, &records).await;
        tick += 1;
    }
}

/// Refuses new connections to the test database and ends the consumer's
/// sessions until the consumer has counted a retried batch, then lets it
/// reconnect.
async fn provoke_db_retry(db: &TestDb, consumer: &ConsumerProcess) {
    let mut admin = db.pool.acquire().await.expect("a connection of the test");
    let limit = |n: i32| format!("ALTER DATABASE {} CONNECTION LIMIT {n}", db.name);
    sqlx::query(&limit(0))
        .execute(&mut *admin)
        .await
        .expect("refuse new connections");
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'inventory-inbox'",
    )
    .execute(&mut *admin)
    .await
    .expect("end the consumer's sessions");
    wait_until(
        Duration::from_secs(20),
        "the consumer retries a batch (inbox_db_retries_total)",
        || async { consumer.metric_sum("inbox_db_retries_total").await > 0.0 },
    )
    .await;
    sqlx::query(&limit(-1))
        .execute(&mut *admin)
        .await
        .expect("accept connections again");
    wait_until(
        Duration::from_secs(20),
        "the consumer is ready again after the refusal",
        || async { matches!(consumer.get("/readyz").await, Some((200, _))) },
    )
    .await;
}

/// Waits until every family of docs/design.md#observability the load drives has moved (and the
/// others are exposed); returns a summary.
async fn every_family_moved(consumer: &ConsumerProcess) -> String {
    const MOVED: [&str; 13] = [
        "inbox_processed_total",
        "inbox_duplicate_ignored_total",
        "inbox_business_duplicate_total",
        r#"inbox_parked_total{reason="malformed_json"}"#,
        r#"inbox_parked_total{reason="unknown_sku"}"#,
        r#"inventory_reservation_lines_total{status="reserved"}"#,
        r#"inventory_reservation_lines_total{status="rejected"}"#,
        "inbox_batch_size_count",
        "inbox_batch_duration_seconds_count",
        "inbox_end_to_end_latency_seconds_count",
        r#"inbox_rebalances_total{kind="assign"}"#,
        "inbox_consumer_lag{",
        "inbox_consumer_lag_seconds{",
    ];
    const EXPOSED: [&str; 3] = [
        "inbox_db_retries_total{",
        "inbox_offset_commit_failures_total",
        "inbox_id_conflict_total",
    ];
    let timeout = Duration::from_secs(30);
    let started = Instant::now();
    loop {
        let body = consumer.get("/metrics").await.unwrap_or_default().1;
        let mut summary = String::new();
        let mut all = EXPOSED.iter().all(|series| body.contains(series));
        for series in MOVED {
            let value: f64 = body
                .lines()
                .filter(|line| line.starts_with(series))
                .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
                .sum();
            // A gauge family (lag) only has to be there; counters must count.
            all &= value > 0.0 || (series.ends_with('{') && body.contains(series));
            write!(summary, "{series}={value} ").expect("write to a String");
        }
        if all {
            return summary;
        }
        assert!(
            started.elapsed() < timeout,
            "not every metric family moved within {timeout:?}: {summary}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
