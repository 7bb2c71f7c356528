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

    db.seed_stock(&[("SKU-LATE", 100)]).await;
    let confirm = console
        .post(
            "/parked/replay",
            cookie,
            &[group[0], group[1], ("csrf", &csrf)],
        )
        .await;
    assert_eq!(confirm.status, 200, "{}", confirm.body);
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
    // The record page shows its replay's outcome; the search, inspect's verdict.
    let first = console.get(&format!("/parked/{}", ids[0]), cookie).await;
    assert!(first.body.contains(": applied"), "{}", first.body);
    let search = console.get("/search?q=ORD-LATE-2", cookie).await;
    assert!(
        search
            .body
            .contains("order ORD-LATE-2: each line once (1 line(s) reserved, 0 rejected)"),
        "{}",
        search.body
    );
    // Two replays done (the second found nothing), two refused.
    assert_eq!(actions(&console, "replay", "done").await, 2.0);
    assert_eq!(actions(&console, "replay", "refused").await, 2.0);
    let log = console.log_text();
    assert!(
        log.contains("console: parked records replayed") && log.contains("127.0.0.1"),
        "each action is logged with where it came from: {log}"
    );
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
    assert!(
        confirm.body.contains("Resume consumption?"),
        "{}",
        confirm.body
    );
    let held = "SELECT count(*) FROM inbox_breaker WHERE resumed_at IS NULL";
    assert_eq!(db.count(held).await, 1);
    let done = console
        .post(
            "/breaker/resume",
            cookie,
            &[("csrf", &csrf), ("confirm", "yes")],
        )
        .await;
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
