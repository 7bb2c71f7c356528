//! The operator console (`inventory-inbox console`) against the real
//! PostgreSQL and Kafka: read-only without a token, sign-in cookies, CSRF,
//! redaction, a group replayed through the console and checked against
//! the database, a rewind through the positions page that applies nothing
//! twice, the breaker resumed, a database that is down, and every page
//! rendered by a real headless Chromium (screenshots kept under the
//! target dir's tmp/console-screenshots).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

const TOKEN: &str = "console-test-token-0123456789";
const CONSUMER: &str = "inventory-allocation-service";

/// A console process, stopped when dropped.
struct Console {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Console {
    /// Starts `inventory-inbox console` with the spec's settings and waits
    /// until it answers.
    async fn start(spec: &ConsumerSpec, database_url: &str, token: Option<&str>) -> Console {
        let port = free_port();
        let log_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-logs");
        std::fs::create_dir_all(&log_dir).expect("log dir");
        let log = log_dir.join(format!("{}.log", unique("console")));
        let mut command = Command::new(binary());
        command
            .arg("console")
            .env("DATABASE_URL", database_url)
            .env("KAFKA_BOOTSTRAP_SERVERS", &spec.bootstrap)
            .env("KAFKA_TOPIC", &spec.topic)
            .env("KAFKA_GROUP_ID", &spec.group)
            .env("INBOX_CONSUMER_NAME", &spec.consumer_name)
            .env("INBOX_CONSOLE_ADDR", format!("127.0.0.1:{port}"))
            .env_remove("INBOX_CONSOLE_TOKEN")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        if let Some(token) = token {
            command.env("INBOX_CONSOLE_TOKEN", token);
        }
        let child = command.spawn().expect("start inventory-inbox console");
        let console = Console { child, port, log };
        wait_until(Duration::from_secs(20), "the console answers", || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await;
        console
    }

    async fn get(&self, path: &str, cookie: Option<&str>) -> Answer {
        request(self.port, "GET", path, cookie, &[]).await
    }

    async fn post(&self, path: &str, cookie: Option<&str>, form: &[(&str, &str)]) -> Answer {
        request(self.port, "POST", path, cookie, form).await
    }

    /// Signs in with the token; the session cookie (`name=value`).
    async fn sign_in(&self) -> String {
        let answer = self.post("/signin", None, &[("token", TOKEN)]).await;
        assert_eq!(answer.status, 303, "{}", answer.body);
        let set_cookie = answer.header("set-cookie").expect("a session cookie");
        set_cookie.split(';').next().expect("name=value").to_owned()
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// An HTTP answer.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }

    /// The CSRF token of the page's forms.
    fn csrf(&self) -> String {
        let at = self
            .body
            .find("name=\"csrf\" value=\"")
            .unwrap_or_else(|| panic!("no CSRF token on the page: {}", self.body));
        let rest = &self.body[at + "name=\"csrf\" value=\"".len()..];
        rest[..rest.find('"').expect("closing quote")].to_owned()
    }
}

impl Answer {
    /// The page's heading (its title, as the browser's tab says it too).
    fn heading(&self) -> String {
        let at = self
            .body
            .find("<h1>")
            .unwrap_or_else(|| panic!("no heading: {}", self.body));
        let rest = &self.body[at + "<h1>".len()..];
        rest[..rest.find("</h1>").expect("closing tag")].to_owned()
    }
}

/// One request over HTTP/1.0 (the server closes after the answer).
async fn request(
    port: u16,
    method: &str,
    path: &str,
    cookie: Option<&str>,
    form: &[(&str, &str)],
) -> Answer {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let mut head = format!("{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n");
    if let Some(cookie) = cookie {
        head.push_str(&format!("Cookie: {cookie}\r\n"));
    }
    if method == "POST" {
        head.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the console");
    stream
        .write_all(format!("{head}\r\n{body}").as_bytes())
        .await
        .expect("send");
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut response))
        .await
        .expect("the console answers within 30 s")
        .expect("read");
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    Answer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// The console's count of an action with a result.
async fn actions(console: &Console, action: &str, result: &str) -> f64 {
    let metrics = console.get("/metrics", None).await;
    series_value(
        &metrics.body,
        &format!("inbox_console_actions_total{{action=\"{action}\",result=\"{result}\"}}"),
    )
    .unwrap_or(0.0)
}

/// A topic whose partition 0 holds `late` orders of an unknown SKU and one
/// record that is no JSON (with a secret header), consumed until all are
/// parked; the consumer stopped.
async fn parked_records(late: usize) -> (TestDb, ConsumerSpec, Vec<i64>) {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let mut records: Vec<Outgoing> = (0..late)
        .map(|i| {
            Outgoing::event(&order(
                &format!("ORD-LATE-{i}"),
                &[("SKU-LATE", i as i32 + 1)],
            ))
        })
        .collect();
    records.push(
        Outgoing::raw("ORD-JUNK", b"junk, not JSON")
            .header("Authorization", "Bearer hunter2-secret")
            .header("ce_source", "tests/console"),
    );
    produce(&producer(), &topic, &records).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, records.len() as i64).await;
    consumer.stop().await;
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM inbox_parked ORDER BY kafka_offset")
        .fetch_all(&db.pool)
        .await
        .expect("parked ids");
    assert_eq!(ids.len(), late + 1, "every record parked");
    (db, spec, ids)
}

#[tokio::test]
async fn a_non_loopback_address_without_a_token_is_refused_in_one_line() {
    let output = Command::new(binary())
        .arg("console")
        .env("INBOX_CONSOLE_ADDR", "0.0.0.0:9465")
        .env_remove("INBOX_CONSOLE_TOKEN")
        .output()
        .expect("run console");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("INBOX_CONSOLE_ADDR=0.0.0.0:9465")
            && lines[0].contains("INBOX_CONSOLE_TOKEN"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_database_that_is_down_is_a_message_on_every_page() {
    let topic = fresh_topic(2).await;
    let spec = ConsumerSpec::at("unused", &topic);
    let down = format!(
        "postgres://inventory:secret-pw@127.0.0.1:{}/inventory",
        free_port()
    );
    let console = Console::start(&spec, &down, Some(TOKEN)).await;
    for path in [
        "/",
        "/parked",
        "/parked/1",
        "/positions",
        "/breaker",
        "/search?q=ORD-1",
    ] {
        let page = console.get(path, None).await;
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        assert!(
            page.body.contains("cannot connect to DATABASE_URL"),
            "{path} says the database is down: {}",
            page.body
        );
        assert!(!page.body.contains("secret-pw"), "{path} shows no password");
        assert!(!page.body.contains("panicked"), "{path}: {}", page.body);
    }
    // The broker answers: the overview still shows the topic's partitions.
    let overview = console.get("/", None).await;
    assert!(
        overview.body.contains("group&#39;s committed")
            || overview.body.contains("group's committed"),
        "{}",
        overview.body
    );
    assert!(!console.log_text().contains("panicked"));
}

#[tokio::test]
async fn without_a_token_the_console_is_read_only_and_shows_no_payload() {
    let (db, spec, ids) = parked_records(1).await;
    let console = Console::start(&spec, &db.url, None).await;
    let parked = console.get("/parked", None).await;
    assert_eq!(parked.status, 200);
    assert!(parked.body.contains("unknown_sku") && parked.body.contains("malformed_json"));
    assert!(parked.body.contains("read-only"), "{}", parked.body);
    assert!(
        !parked.body.contains("Replay"),
        "no action is offered: {}",
        parked.body
    );
    let junk = console.get(&format!("/parked/{}", ids[1]), None).await;
    assert_eq!(junk.status, 200);
    assert!(junk.body.contains("malformed_json"));
    assert!(
        !junk.body.contains("junk, not JSON"),
        "no payload: {}",
        junk.body
    );
    assert!(
        !junk.body.contains("ce_source"),
        "no headers: {}",
        junk.body
    );

    let refused = console
        .post(
            "/parked/replay",
            None,
            &[("id", &ids[0].to_string()), ("confirm", "yes")],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(refused.heading(), "Parked records not replayed");
    let signin = console.post("/signin", None, &[("token", "")]).await;
    assert_eq!(signin.status, 401);
    assert!(signin.header("set-cookie").is_none());
    assert_eq!(actions(&console, "replay", "refused").await, 1.0);
    assert_eq!(actions(&console, "replay", "done").await, 0.0);
    assert_eq!(
        db.count("SELECT count(*) FROM inbox_parked WHERE replay_outcome IS NOT NULL")
            .await,
        0,
        "nothing was replayed"
    );
}

#[tokio::test]
async fn a_parked_group_replayed_through_the_console_is_applied_once() {
    let (db, spec, ids) = parked_records(5).await;
    let console = Console::start(&spec, &db.url, Some(TOKEN)).await;

    // A wrong token: no cookie. The right one: an HttpOnly, SameSite=Strict
    // session cookie.
    let wrong = console
        .post("/signin", None, &[("token", "not-the-token-at-all")])
        .await;
    assert_eq!(wrong.status, 401);
    assert!(wrong.header("set-cookie").is_none());
    let answer = console.post("/signin", None, &[("token", TOKEN)]).await;
    let set_cookie = answer.header("set-cookie").expect("cookie");
    assert!(
        set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"),
        "{set_cookie}"
    );
    let cookie = console.sign_in().await;
    let cookie = Some(cookie.as_str());

    let parked = console.get("/parked", cookie).await;
    let csrf = parked.csrf();
    let today = chrono::Utc::now().date_naive().to_string();
    assert!(
        parked
            .body
            .contains(&format!("/parked?reason=unknown_sku&amp;day={today}")),
        "{}",
        parked.body
    );
    // Signed in: the payload, and the headers with the secret redacted.
    let junk = console.get(&format!("/parked/{}", ids[5]), cookie).await;
    assert!(junk.body.contains("junk, not JSON"), "{}", junk.body);
    assert!(
        junk.body.contains("Authorization: [redacted]"),
        "{}",
        junk.body
    );
    assert!(!junk.body.contains("hunter2"), "{}", junk.body);

    let group = [("reason", "unknown_sku"), ("day", today.as_str())];
    // A forged CSRF token, or none: refused, nothing replayed.
    let forged = console
        .post(
            "/parked/replay",
            cookie,
            &[group[0], group[1], ("csrf", "forged"), ("confirm", "yes")],
        )
        .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    let without = console
        .post(
            "/parked/replay",
            cookie,
            &[group[0], group[1], ("confirm", "yes")],
        )
        .await;
    assert_eq!(without.status, 403);
    assert_eq!(db.ledger_rows().await, 0);

    // Replayed before its SKU exists: still parked, and said so.
    let early = console
        .post(
            "/parked/replay",
            cookie,
            &[
                ("id", &ids[0].to_string()),
                ("csrf", &csrf),
                ("confirm", "yes"),
            ],
        )
        .await;
    assert!(
        early
            .body
            .contains("Replayed 1 record(s): 0 applied, 0 duplicate, 1 still parked"),
        "{}",
        early.body
    );

    db.seed_stock(&[("SKU-LATE", 100)]).await;
    let confirm = console
        .post(
            "/parked/replay",
            cookie,
            &[group[0], group[1], ("csrf", &csrf)],
        )
        .await;
    assert_eq!(confirm.status, 200, "{}", confirm.body);
    assert_eq!(confirm.heading(), "Replay parked records?");
    assert!(
        confirm.body.contains("<title>Replay parked records? · "),
        "{}",
        confirm.body
    );
    assert!(
        confirm.body.contains("5 parked record(s)"),
        "the confirmation says how many: {}",
        confirm.body
    );
    assert_eq!(db.ledger_rows().await, 0, "a confirmation does nothing");

    let done = console
        .post(
            "/parked/replay",
            cookie,
            &[group[0], group[1], ("csrf", &csrf), ("confirm", "yes")],
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(done.heading(), "Parked records replayed");
    assert!(
        done.body
            .contains("Replayed 5 record(s): 5 applied, 0 duplicate, 0 still parked"),
        "{}",
        done.body
    );
    assert_eq!(db.ledger_rows().await, 5);
    assert_eq!(db.reserved("SKU-LATE").await, 1 + 2 + 3 + 4 + 5);
    assert_eq!(
        db.count("SELECT count(*) FROM inbox_parked WHERE replayed_at IS NOT NULL")
            .await,
        5
    );
    // The group is done: a second replay finds nothing, applies nothing.
    let again = console
        .post(
            "/parked/replay",
            cookie,
            &[group[0], group[1], ("csrf", &csrf), ("confirm", "yes")],
        )
        .await;
    assert!(
        again.body.contains("Replayed 0 record(s)"),
        "{}",
        again.body
    );
    assert_eq!(db.reserved("SKU-LATE").await, 15);
    // The record page shows every replay's outcome, oldest first, and who
    // replayed it; the search, inspect's verdict.
    let first = console.get(&format!("/parked/{}", ids[0]), cookie).await;
    assert!(first.body.contains(": applied"), "{}", first.body);
    let history = &first.body[first.body.find("<h2>Replays</h2>").expect("the replays")..];
    let still = history
        .find("still parked: unknown_sku")
        .unwrap_or_else(|| panic!("the first replay's outcome: {history}"));
    let applied = history
        .find("<td>applied</td>")
        .unwrap_or_else(|| panic!("the second replay's outcome: {history}"));
    assert!(still < applied, "oldest first: {history}");
    assert_eq!(
        history.matches("console, from 127.0.0.1").count(),
        2,
        "{history}"
    );
    let (kept,): (i32,) =
        sqlx::query_as("SELECT jsonb_array_length(replays) FROM inbox_parked WHERE id = $1")
            .bind(ids[0])
            .fetch_one(&db.pool)
            .await
            .expect("the history");
    assert_eq!(kept, 2);
    let search = console.get("/search?q=ORD-LATE-2", cookie).await;
    assert!(
        search
            .body
            .contains("order ORD-LATE-2: each line once (1 line(s) reserved, 0 rejected)"),
        "{}",
        search.body
    );
    // Three replays done (the early one, the group, and the group again,
    // which found nothing), two refused.
    assert_eq!(actions(&console, "replay", "done").await, 3.0);
    assert_eq!(actions(&console, "replay", "refused").await, 2.0);
    let log = console.log_text();
    assert!(
        log.contains("console: parked records replayed") && log.contains("127.0.0.1"),
        "each action is logged with where it came from: {log}"
    );
}

#[tokio::test]
async fn a_group_too_large_for_a_request_is_replayed_beside_it_with_its_progress() {
    // More than the 500 records a replay takes within its request.
    let late = 600;
    let (db, spec, _) = parked_records(late).await;
    let console = Console::start(&spec, &db.url, Some(TOKEN)).await;
    let cookie = console.sign_in().await;
    let cookie = Some(cookie.as_str());
    let csrf = console.get("/parked", cookie).await.csrf();
    let today = chrono::Utc::now().date_naive().to_string();
    db.seed_stock(&[("SKU-LATE", 1_000_000)]).await;
    let group = [
        ("reason", "unknown_sku"),
        ("day", today.as_str()),
        ("csrf", csrf.as_str()),
    ];
    let confirm = console.post("/parked/replay", cookie, &group).await;
    assert_eq!(confirm.heading(), "Replay parked records?");
    assert!(
        confirm.body.contains("600 parked record(s)")
            && confirm.body.contains("runs beside the console"),
        "{}",
        confirm.body
    );
    let started = console
        .post(
            "/parked/replay",
            cookie,
            &[group[0], group[1], group[2], ("confirm", "yes")],
        )
        .await;
    assert_eq!(started.status, 303, "{}", started.body);
    assert_eq!(
        started.header("location").as_deref(),
        Some("/parked/replaying")
    );
    // The progress page reloads itself while the replay runs, not after.
    let first = console.get("/parked/replaying", None).await;
    let running = first.heading() == "Group replay running";
    assert_eq!(
        running,
        first.body.contains("http-equiv=\"refresh\""),
        "{}",
        first.body
    );
    wait_until(
        Duration::from_secs(120),
        "the group replay ends",
        || async { console.get("/parked/replaying", None).await.heading() == "Group replay ended" },
    )
    .await;
    let ended = console.get("/parked/replaying", None).await;
    assert!(
        ended
            .body
            .contains("600 of 600 replayed (100 %): 600 applied, 0 duplicate, 0 still parked."),
        "{}",
        ended.body
    );
    assert!(!ended.body.contains("http-equiv=\"refresh\""));
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let png = shots.join("group-replay.png");
    chromium_run(
        &format!("http://127.0.0.1:{}/parked/replaying", console.port),
        Some(&png),
    );
    assert!(
        std::fs::metadata(&png).is_ok_and(|m| m.len() > 10_000),
        "a screenshot of the progress page"
    );
    assert_eq!(db.ledger_rows().await, late as i64);
    assert_eq!(
        db.reserved("SKU-LATE").await,
        (1..=late as i64).sum::<i64>(),
        "every record applied once"
    );
    assert_eq!(actions(&console, "replay", "done").await, 1.0);
    assert!(
        console.log_text().contains("console: a group replay ended"),
        "{}",
        console.log_text()
    );
}

#[tokio::test]
async fn stopping_the_console_stops_a_group_replay_between_two_records() {
    // Fewer than the poison breaker's 1,000 parked in a row.
    let late = 900;
    let (db, spec, _) = parked_records(late).await;
    let mut console = Console::start(&spec, &db.url, Some(TOKEN)).await;
    let cookie = console.sign_in().await;
    let csrf = console.get("/parked", Some(&cookie)).await.csrf();
    let today = chrono::Utc::now().date_naive().to_string();
    db.seed_stock(&[("SKU-LATE", 10_000_000)]).await;
    let started = console
        .post(
            "/parked/replay",
            Some(&cookie),
            &[
                ("reason", "unknown_sku"),
                ("day", &today),
                ("csrf", &csrf),
                ("confirm", "yes"),
            ],
        )
        .await;
    assert_eq!(started.status, 303, "{}", started.body);
    // SIGTERM while it runs: the console stops it and waits for it.
    unsafe { libc::kill(console.child.id() as i32, libc::SIGTERM) };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = console.child.try_wait().expect("the console's state") {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the console stops within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "{status:?}: {}", console.log_text());
    let log = console.log_text();
    let stopped = log.contains("console: a group replay was stopped by the console's end");
    assert!(
        stopped || log.contains("console: a group replay ended"),
        "{log}"
    );
    // Each record replayed is applied and recorded once; the rest is
    // parked as it was, eligible.
    let applied = db.ledger_rows().await;
    assert_eq!(
        db.count("SELECT count(*) FROM inbox_parked WHERE replayed_at IS NOT NULL")
            .await,
        applied
    );
    assert_eq!(
        db.count("SELECT coalesce(sum(jsonb_array_length(replays)), 0) FROM inbox_parked")
            .await,
        applied,
        "one replay recorded for each record applied, none for the rest"
    );
    if stopped {
        assert!(applied < late as i64, "stopped before the end: {applied}");
    }
}

#[tokio::test]
async fn a_rewind_through_the_positions_page_rereads_and_applies_nothing_twice() {
    let topic = fresh_topic(2).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1000)]).await;
    let records: Vec<Outgoing> = (0..6)
        .map(|i| {
            Outgoing::event(&order(&format!("ORD-RW-{i}"), &[("SKU-1", 2)])).on_partition(i % 2)
        })
        .collect();
    produce(&producer(), &topic, &records).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_for_ledger(&db, 6, Duration::from_secs(60)).await;
    consumer.stop().await;
    let console = Console::start(&spec, &db.url, Some(TOKEN)).await;
    let cookie = console.sign_in().await;
    let cookie = Some(cookie.as_str());
    let page = console.get("/positions", cookie).await;
    let csrf = page.csrf();

    let form = [
        ("partition", "1"),
        ("offset", "earliest"),
        ("csrf", csrf.as_str()),
    ];
    let confirm = console.post("/positions/set", cookie, &form).await;
    assert_eq!(confirm.status, 200, "{}", confirm.body);
    assert_eq!(confirm.heading(), "Set positions?");
    assert!(
        confirm.body.contains("1 partition(s)") && confirm.body.contains("3 record(s) read again"),
        "the confirmation names the partitions and the records: {}",
        confirm.body
    );
    let position = |partition: i32| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_as::<_, (i64, bool)>(
                "SELECT next_offset, moved_by_operator FROM inbox_position WHERE kafka_partition = $1",
            )
            .bind(partition)
            .fetch_one(&pool)
            .await
            .expect("position")
        }
    };
    assert_eq!(
        position(1).await,
        (3, false),
        "a confirmation moves nothing"
    );
    let done = console
        .post(
            "/positions/set",
            cookie,
            &[form[0], form[1], form[2], ("confirm", "yes")],
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(done.heading(), "Positions set");
    assert_eq!(position(1).await, (0, true));
    assert_eq!(position(0).await.0, 3, "partition 0 was not named");
    assert_eq!(actions(&console, "positions_set", "done").await, 1.0);

    // The consumer reads partition 1 again: nothing is applied twice.
    let consumer = spec.start();
    wait_until(
        Duration::from_secs(60),
        "partition 1 read again",
        || async { position(1).await.0 == 3 },
    )
    .await;
    consumer.stop().await;
    assert_eq!(db.ledger_rows().await, 6);
    assert_eq!(db.reserved("SKU-1").await, 12);
}

/// The overview's lag in seconds of `partition`.
fn lag_seconds_of(overview: &Answer, partition: i32) -> f64 {
    let cell = format!("data-lag-seconds-of=\"{partition}\">");
    let at = overview
        .body
        .find(&cell)
        .unwrap_or_else(|| panic!("no lag in seconds of {partition}: {}", overview.body));
    let rest = &overview.body[at + cell.len()..];
    rest[..rest.find('<').expect("the cell's end")]
        .parse()
        .unwrap_or_else(|_| panic!("lag of {partition} is no number: {rest}"))
}

#[tokio::test]
async fn the_overview_shows_lag_in_seconds_of_the_oldest_unread_record() {
    let topic = fresh_topic(2).await;
    let db = TestDb::new().await;
    let now = chrono::Utc::now().timestamp_millis();
    let hours_ago = |hours: i64| now - hours * 3_600_000;
    // Partition 0: a record of two hours ago (read), then one of an hour
    // ago (not read yet). Partition 1: one record, read.
    let records = [
        Outgoing::raw("ORD-A", b"{}")
            .on_partition(0)
            .at_timestamp(hours_ago(2)),
        Outgoing::raw("ORD-B", b"{}")
            .on_partition(0)
            .at_timestamp(hours_ago(1)),
        Outgoing::raw("ORD-C", b"{}")
            .on_partition(1)
            .at_timestamp(hours_ago(3)),
    ];
    produce(&producer(), &topic, &records).await;
    let spec = ConsumerSpec::new(&db, &topic);
    commit_offsets(&spec.group, &topic, &[(0, 1), (1, 1)]);
    let console = Console::start(&spec, &db.url, None).await;
    let overview = console.get("/", None).await;
    assert_eq!(overview.status, 200, "{}", overview.body);
    let unread = lag_seconds_of(&overview, 0);
    assert!(
        (3_600.0..3_700.0).contains(&unread),
        "partition 0 lags by its unread record's age, an hour, not by the read one's: {unread}"
    );
    assert_eq!(
        lag_seconds_of(&overview, 1),
        0.0,
        "partition 1 is read to its end"
    );

    // The database's position is the authority: at the end of partition 0,
    // it lags no more.
    sqlx::query(
        "INSERT INTO inbox_position (consumer, topic, kafka_partition, next_offset) \
         VALUES ($1, $2, 0, 2)",
    )
    .bind(&spec.consumer_name)
    .bind(&topic)
    .execute(&db.pool)
    .await
    .expect("a position");
    let overview = console.get("/", None).await;
    assert_eq!(lag_seconds_of(&overview, 0), 0.0, "{}", overview.body);
}

/// `inventory-inbox maintain` against `url`; whether it succeeded.
fn maintain_command(url: &str) -> bool {
    Command::new(binary())
        .arg("maintain")
        .env("DATABASE_URL", url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run maintain")
        .success()
}

#[tokio::test]
async fn the_overview_shows_the_last_maintenance_and_its_result() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    let spec = ConsumerSpec::new(&db, &topic);
    let console = Console::start(&spec, &db.url, None).await;
    // As the service's own role, as cron runs it.
    assert!(maintain_command(&db.app_url), "maintain as the app role");
    let overview = console.get("/", None).await;
    let section = &overview.body[overview
        .body
        .find("<h2>Maintenance</h2>")
        .expect("the maintenance section")..];
    assert!(
        section.contains("Last run: started ")
            && section.contains(" by maintain: ok; partitions created 0, dropped 0"),
        "{section}"
    );
    assert!(
        section.contains("<td>migrate</td>"),
        "migrate's run: {section}"
    );
    // The service's role writes the record only through its functions.
    let app = sqlx::PgPool::connect(&db.app_url)
        .await
        .expect("as the app");
    let refused = sqlx::query("DELETE FROM inbox_maintenance_run")
        .execute(&app)
        .await
        .expect_err("the app role may not delete the history");
    assert!(
        refused.to_string().contains("permission denied"),
        "{refused}"
    );
    app.close().await;

    // A run that fails: the overview says so, and which run last did the
    // work.
    sqlx::query("ALTER FUNCTION inbox_drop_expired() RENAME TO inbox_drop_expired_away")
        .execute(&db.pool)
        .await
        .expect("rename");
    assert!(!maintain_command(&db.url), "maintain fails");
    sqlx::query("ALTER FUNCTION inbox_drop_expired_away() RENAME TO inbox_drop_expired")
        .execute(&db.pool)
        .await
        .expect("rename back");
    let overview = console.get("/", None).await;
    let section = &overview.body[overview
        .body
        .find("<h2>Maintenance</h2>")
        .expect("the maintenance section")..];
    assert!(
        section.contains("class=\"err\">Last run: started ")
            && section.contains("by maintain: failed: ")
            && section.contains("inbox_drop_expired"),
        "{section}"
    );
    assert!(
        section.contains("The last that did the work: started "),
        "{section}"
    );
    let recorded = db
        .count("SELECT count(*) FROM inbox_maintenance_run WHERE error LIKE '%inbox_drop_expired%'")
        .await;
    assert_eq!(recorded, 1, "the failed run is in the database");
}

#[tokio::test]
async fn the_breaker_is_resumed_through_the_console() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    sqlx::query(include_str!("../sql/breaker_open.sql"))
        .bind(CONSUMER)
        .bind("40 records in a row were parked")
        .execute(&db.pool)
        .await
        .expect("open the breaker");
    let spec = ConsumerSpec::new(&db, &topic);
    let console = Console::start(&spec, &db.url, Some(TOKEN)).await;
    let cookie = console.sign_in().await;
    let cookie = Some(cookie.as_str());
    let page = console.get("/breaker", cookie).await;
    assert!(
        page.body.contains("HOLDS consumption since"),
        "{}",
        page.body
    );
    assert!(page.body.contains("40 records in a row were parked"));
    let csrf = page.csrf();
    let confirm = console
        .post("/breaker/resume", cookie, &[("csrf", &csrf)])
        .await;
    assert_eq!(confirm.heading(), "Resume consumption?");
    let held = "SELECT count(*) FROM inbox_breaker WHERE resumed_at IS NULL";
    assert_eq!(db.count(held).await, 1);
    let done = console
        .post(
            "/breaker/resume",
            cookie,
            &[("csrf", &csrf), ("confirm", "yes")],
        )
        .await;
    assert_eq!(done.heading(), "Breaker resumed");
    assert!(done.body.contains("Resumed (held since"), "{}", done.body);
    assert_eq!(db.count(held).await, 0);
    assert_eq!(actions(&console, "breaker_resume", "done").await, 1.0);
}

/// Debian's Chromium; the test fails without it (scripts/test-deps.sh
/// installs it).
fn chromium() -> PathBuf {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("Chromium is not installed: run scripts/test-deps.sh (apt-get install chromium)")
}

/// Chromium, headless, on `url`: `--screenshot` into `png` or `--dump-dom`.
fn chromium_run(url: &str, png: Option<&Path>) -> String {
    let profile = std::env::temp_dir().join(unique("chromium-profile"));
    let mut command = Command::new(chromium());
    command.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--window-size=1280,1000",
        &format!("--user-data-dir={}", profile.display()),
    ]);
    match png {
        Some(png) => command.arg(format!("--screenshot={}", png.display())),
        None => command.arg("--dump-dom"),
    };
    let output = command.arg(url).output().expect("run chromium");
    let _ = std::fs::remove_dir_all(&profile);
    assert!(output.status.success(), "chromium {url}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn every_page_renders_in_headless_chromium() {
    let (db, spec, ids) = parked_records(3).await;
    let console = Console::start(&spec, &db.url, None).await;
    let base = format!("http://127.0.0.1:{}", console.port);
    let pages = [
        ("overview", "/".to_owned(), "Events per second by outcome"),
        ("parked", "/parked".to_owned(), "By reason and day"),
        (
            "parked-filtered",
            "/parked?reason=unknown_sku".to_owned(),
            "ORD-LATE-2",
        ),
        ("record", format!("/parked/{}", ids[0]), "unknown_sku"),
        (
            "search",
            "/search?q=ORD-LATE-1".to_owned(),
            "order ORD-LATE-1",
        ),
        ("positions", "/positions".to_owned(), "lag (records)"),
        ("breaker", "/breaker".to_owned(), "never opened"),
    ];
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    for (name, path, expected) in &pages {
        let url = format!("{base}{path}");
        let dom = chromium_run(&url, None);
        assert!(
            dom.contains(expected),
            "{name}: the browser's DOM lacks {expected:?}: {dom}"
        );
        assert!(!dom.contains("panicked"), "{name}");
        let png = shots.join(format!("{name}.png"));
        let _ = std::fs::remove_file(&png);
        chromium_run(&url, Some(&png));
        let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{name}: no screenshot: {e}"));
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{name}: a PNG");
        // PNG IHDR: width and height at bytes 16..24.
        let width = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
        let height = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
        assert_eq!((width, height), (1280, 1000), "{name}");
        assert!(
            bytes.len() > 10_000,
            "{name}: a page, not a blank ({} bytes)",
            bytes.len()
        );
    }
}

/// A WebDriver session of Debian's chromedriver driving headless Chromium,
/// over the W3C protocol's plain HTTP and JSON; the driver is killed when
/// dropped.
struct Browser {
    driver: Child,
    port: u16,
    session: String,
}

/// The W3C key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Drop for Browser {
    /// Ends the session (chromedriver then quits its Chromium), also when
    /// the test failed, then the driver.
    fn drop(&mut self) {
        use std::io::{Read, Write};
        if !self.session.is_empty() {
            if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                // The answer is read, not waited out: the driver keeps
                // the connection open.
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let _ = write!(
                    stream,
                    "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                    self.session
                );
                let _ = stream.read(&mut [0u8; 1024]);
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Browser {
    async fn start() -> Browser {
        let driver_path = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .expect("chromedriver is not installed: run scripts/test-deps.sh (apt-get install chromium-driver)");
        let port = free_port();
        let driver = Command::new(driver_path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        wait_until(Duration::from_secs(20), "chromedriver answers", || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await;
        let mut browser = Browser {
            driver,
            port,
            session: String::new(),
        };
        let capabilities = serde_json::json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium().display().to_string(),
                "args": ["--headless", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--hide-scrollbars",
                         "--window-size=1280,1000"],
            }
        }}});
        let created = browser.call("POST", "/session", Some(capabilities)).await;
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {created}"))
            .to_owned();
        browser
    }

    /// One WebDriver command; its `value`.
    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> serde_json::Value {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .expect("connect to chromedriver");
        let request = format!(
            // chromedriver refuses HTTP/1.0.
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.expect("send");
        // chromedriver keeps the connection open after its answer: read
        // the head, then Content-Length bytes.
        let read = async {
            let mut response = Vec::new();
            let mut chunk = vec![0u8; 65536];
            loop {
                let n = stream.read(&mut chunk).await.expect("read");
                assert!(
                    n > 0,
                    "chromedriver closed before answering {method} {path}"
                );
                response.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&response);
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .expect("a Content-Length");
                    if body.len() >= length {
                        return body[..length].to_owned();
                    }
                }
            }
        };
        let json = tokio::time::timeout(Duration::from_secs(60), read)
            .await
            .unwrap_or_else(|_| panic!("chromedriver answers {method} {path} within 60 s"));
        let answer: serde_json::Value =
            serde_json::from_str(&json).unwrap_or_else(|e| panic!("{method} {path}: {e}: {json}"));
        assert!(
            answer["value"].get("error").is_none(),
            "{method} {path}: {answer}"
        );
        answer["value"].clone()
    }

    fn at(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    async fn open(&self, url: &str) {
        self.call(
            "POST",
            &self.at("/url"),
            Some(serde_json::json!({ "url": url })),
        )
        .await;
    }

    async fn find(&self, css: &str) -> String {
        let found = self
            .call(
                "POST",
                &self.at("/element"),
                Some(serde_json::json!({"using": "css selector", "value": css})),
            )
            .await;
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_owned()
    }

    async fn click(&self, css: &str) {
        let element = self.find(css).await;
        self.call(
            "POST",
            &self.at(&format!("/element/{element}/click")),
            Some(serde_json::json!({})),
        )
        .await;
    }

    async fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        self.call(
            "POST",
            &self.at(&format!("/element/{element}/value")),
            Some(serde_json::json!({ "text": text })),
        )
        .await;
    }

    async fn source(&self) -> String {
        self.call("GET", &self.at("/source"), None)
            .await
            .as_str()
            .expect("the page's source")
            .to_owned()
    }

    /// The page's source once it contains `text`: a click that submits a
    /// form returns before the next page has loaded.
    async fn source_with(&self, text: &str) -> String {
        let mut source = String::new();
        for _ in 0..200 {
            source = self.source().await;
            if source.contains(text) {
                return source;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the page never showed {text:?}: {source}");
    }

    /// A screenshot of the window, written to `png`.
    async fn screenshot(&self, png: &Path) {
        let encoded = self.call("GET", &self.at("/screenshot"), None).await;
        let bytes = base64_decode(encoded.as_str().expect("base64"));
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        std::fs::write(png, bytes).expect("write the screenshot");
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut bits, mut count) = (0u32, 0);
    for byte in text
        .bytes()
        .filter(|b| *b != b'=' && !b.is_ascii_whitespace())
    {
        let value = ALPHABET.iter().position(|a| *a == byte).expect("base64") as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
        }
    }
    out
}

#[tokio::test]
async fn an_operator_signs_in_and_replays_a_group_in_the_browser() {
    let (db, spec, _) = parked_records(3).await;
    let console = Console::start(&spec, &db.url, Some(TOKEN)).await;
    let base = format!("http://127.0.0.1:{}", console.port);
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let browser = Browser::start().await;

    browser.open(&format!("{base}/signin")).await;
    browser.type_into("input[name=token]", TOKEN).await;
    browser.click("form[action='/signin'] button").await;
    browser.source_with("Sign out").await;

    browser.open(&format!("{base}/parked")).await;
    let parked = browser.source().await;
    assert!(parked.contains("Replay group"), "{parked}");
    browser
        .screenshot(&shots.join("signed-in-parked.png"))
        .await;
    db.seed_stock(&[("SKU-LATE", 100)]).await;
    browser
        .click("input[name=reason][value=unknown_sku] ~ button")
        .await;
    browser.source_with("3 parked record(s)").await;
    browser
        .screenshot(&shots.join("signed-in-confirm.png"))
        .await;
    assert_eq!(db.ledger_rows().await, 0, "a confirmation does nothing");
    browser.click("button.danger").await;
    browser
        .source_with("Replayed 3 record(s): 3 applied, 0 duplicate, 0 still parked")
        .await;
    browser
        .screenshot(&shots.join("signed-in-replayed.png"))
        .await;
    assert_eq!(db.ledger_rows().await, 3);
    assert_eq!(db.reserved("SKU-LATE").await, 1 + 2 + 3);

    // The record page, signed in: payload and redacted headers.
    let junk: i64 =
        sqlx::query_scalar("SELECT id FROM inbox_parked WHERE reason = 'malformed_json'")
            .fetch_one(&db.pool)
            .await
            .expect("the junk record");
    browser.open(&format!("{base}/parked/{junk}")).await;
    let record = browser.source().await;
    assert!(
        record.contains("junk, not JSON") && record.contains("Authorization: [redacted]"),
        "{record}"
    );
    assert!(!record.contains("hunter2"));
    browser
        .screenshot(&shots.join("signed-in-record.png"))
        .await;
    browser.call("DELETE", &browser.at(""), None).await;
}
