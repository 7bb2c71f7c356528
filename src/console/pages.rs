//! The console's pages as HTML (maud: escaped by construction). Pure: each
//! function renders what the handlers looked up, a look-up that failed as
//! its message in place of its section.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, DurationRound, Utc};
use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::group_replay::{GroupReplay, Progress};
use super::session::Standing;
use super::Asked;
use crate::event::ParkReason;
use crate::inspect::Inspection;
use crate::kafka::cluster::{GroupMember, PartitionOffsets};
use crate::operator::PlannedMove;
use crate::store::positions::Position;
use crate::store::{
    BreakerState, MaintenanceRun, OutcomeMinute, ParkedEntry, ParkedFilter, ParkedGroup,
    ParkedRecord, ReplayOutcome,
};

/// Bytes of a payload shown on a record's page.
const PAYLOAD_SHOWN: usize = 4096;
/// Ids named on a replay's confirmation.
const IDS_NAMED: usize = 20;

const STYLE: &str = "
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}
header{background:#1f2d3d;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:center}
header a{color:#cfe3ff;text-decoration:none}header a:hover{text-decoration:underline}
header .who{margin-left:auto;font-size:12px}
main{padding:12px 16px;max-width:1200px}
h1{font-size:20px;margin:8px 0}h2{font-size:16px;margin:18px 0 6px}
table{border-collapse:collapse;background:#fff;margin:4px 0}
th,td{border:1px solid #d6dae0;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5}td.n{text-align:right;font-variant-numeric:tabular-nums}
.err{background:#fdecea;border:1px solid #f5c2c0;padding:6px 10px;color:#8a1c14}
.ok{background:#e8f5e9;border:1px solid #b7dfb9;padding:6px 10px}
.warn{background:#fff6e0;border:1px solid #f0d58a;padding:6px 10px}
.verdict{font-size:15px;background:#fff;border-left:4px solid #3f6fb5;padding:8px 12px}
pre{background:#fff;border:1px solid #d6dae0;padding:8px;overflow:auto;max-height:320px}
form.inline{display:inline}input,select,button{font:inherit}
button{background:#3f6fb5;color:#fff;border:0;padding:3px 10px;border-radius:3px;cursor:pointer}
button.danger{background:#b53f3f}
.muted{color:#6a737d}
";

pub fn layout(title: &str, standing: &Standing, body: Markup) -> Markup {
    page(title, standing, body, None)
}

/// A page; one that shows something in progress reloads itself every
/// `refresh` seconds (no script: a `meta` refresh).
pub fn page(title: &str, standing: &Standing, body: Markup, refresh: Option<u32>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                @if let Some(seconds) = refresh { meta http-equiv="refresh" content=(seconds); }
                title { (title) " · inventory-inbox console" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    strong { "inventory-inbox" }
                    a href="/" { "Overview" }
                    a href="/parked" { "Parked" }
                    a href="/search" { "Search" }
                    a href="/positions" { "Positions" }
                    a href="/breaker" { "Breaker" }
                    span.who {
                        @match standing {
                            Standing::ReadOnly => { "read-only (INBOX_CONSOLE_TOKEN not set)" }
                            Standing::SignedOut => { a href="/signin" { "Sign in" } " to act" }
                            Standing::SignedIn { csrf } => {
                                "signed in "
                                form.inline method="post" action="/signout" {
                                    input type="hidden" name="csrf" value=(csrf);
                                    button type="submit" { "Sign out" }
                                }
                            }
                        }
                    }
                }
                main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

pub fn message(text: &str) -> Markup {
    html! { p.warn { (text) } }
}

fn failed(why: &str) -> Markup {
    html! { p.err { "Not available: " (why) } }
}

fn csrf_field(standing: &Standing) -> Markup {
    html! { input type="hidden" name="csrf" value=(standing.csrf()); }
}

fn time(at: &DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

fn search_link(text: &str) -> Markup {
    let href = format!(
        "/search?q={}",
        form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>()
    );
    html! { a href=(href) { (text) } }
}

pub fn sign_in(standing: &Standing, error: Option<&str>) -> Markup {
    html! {
        @if let Some(error) = error { p.err { (error) } }
        @match standing {
            Standing::ReadOnly => p.warn { "This console is read-only: INBOX_CONSOLE_TOKEN is not set." },
            Standing::SignedIn { .. } => p.ok { "Signed in." },
            Standing::SignedOut => form method="post" action="/signin" {
                label { "Token " input type="password" name="token" autocomplete="current-password"; }
                " " button type="submit" { "Sign in" }
            },
        }
    }
}

/// Per partition behind, the Kafka timestamp (ms) of its oldest record not
/// yet applied; or why they could not be read.
pub type OldestUnread = Result<Vec<(i32, i64)>, String>;

pub struct Overview<'a> {
    pub topic: &'a str,
    pub group: &'a str,
    pub consumer: &'a str,
    pub offsets: Result<Vec<PartitionOffsets>, String>,
    pub stored: Result<Vec<Position>, String>,
    pub members: Result<(String, Vec<GroupMember>), String>,
    pub breaker: Result<Option<BreakerState>, String>,
    pub rates: Result<Vec<OutcomeMinute>, String>,
    pub unfiltered: Result<i64, String>,
    /// The last maintenance runs, newest first (`store::maintenance_runs`).
    pub maintenance: Result<Vec<MaintenanceRun>, String>,
    /// The Kafka timestamp (ms) of each partition's oldest record not yet
    /// applied (the one at [`reads_from`]); a partition read to its end
    /// has none.
    pub oldest_unread: OldestUnread,
    pub now: DateTime<Utc>,
}

pub fn overview(o: &Overview<'_>) -> Markup {
    html! {
        p.muted { "Consumer " code { (o.consumer) } ", topic " code { (o.topic) } ", group " code { (o.group) } "." }
        h2 { "Breaker" }
        (breaker_state(&o.breaker))
        h2 { "Partitions" }
        (partition_table(&o.offsets, &o.stored, Some((&o.oldest_unread, o.now))))
        h2 { "Group members" }
        @match &o.members {
            Err(why) => (failed(why)),
            Ok((state, members)) => {
                p { "Group state: " strong { (state) } ", " (members.len()) " member(s)." }
                @if !members.is_empty() {
                    table {
                        tr { th { "member" } th { "client" } th { "host" } }
                        @for m in members { tr { td { code { (m.member_id) } } td { (m.client_id) } td { (m.host) } } }
                    }
                }
            }
        }
        h2 { "Events per second by outcome, last hour" }
        @match &o.rates {
            Err(why) => (failed(why)),
            Ok(rates) => (chart(rates, Utc::now())),
        }
        h2 { "Ledger filters" }
        @match &o.unfiltered {
            Err(why) => (failed(why)),
            Ok(0) => p.ok { "Every closed ledger day has its filter." },
            Ok(days) => p.warn { (days) " closed ledger day(s) without a filter: every batch looks them up in full until maintenance builds theirs (" code { "inventory-inbox maintain" } ")." },
        }
        h2 { "Maintenance" }
        @match &o.maintenance {
            Err(why) => (failed(why)),
            Ok(runs) => (maintenance(runs, o.now)),
        }
    }
}

/// Longest since maintenance last did its work before the overview warns:
/// `run` maintains hourly, and the window has two days made ahead.
const MAINTENANCE_OVERDUE_HOURS: i64 = 3;

/// The last maintenance and its result, the last one that did the work
/// when that is another, and the runs before.
fn maintenance(runs: &[MaintenanceRun], now: DateTime<Utc>) -> Markup {
    let done = runs.iter().find(|r| r.did_the_work());
    html! {
        @match runs.first() {
            None => p.warn { "No maintenance run is recorded: run " code { "inventory-inbox maintain" } ", or start " code { "run" } " (it maintains at start-up and hourly)." },
            Some(last) => {
                @let class = match (&last.error, last.finished_at) {
                    (Some(_), _) => "err",
                    (None, None) => "warn",
                    _ => "ok",
                };
                p class=(class) { "Last run: " (run_result(last)) }
                @if let Some(done) = done.filter(|d| d.id != last.id) {
                    p.muted { "The last that did the work: " (run_result(done)) }
                }
                @match done {
                    None => p.err { "No recorded run did the work (held the lock and ended well): the window's partitions ahead are not being made." },
                    Some(d) if now - d.started_at > Duration::hours(MAINTENANCE_OVERDUE_HOURS) => p.err {
                        "No run did the work for " ((now - d.started_at).num_hours()) " hours: partitions are made two days ahead; run " code { "inventory-inbox maintain" } " and see its error."
                    },
                    Some(_) => {},
                }
                table {
                    tr { th { "started" } th { "by" } th { "took" } th { "partitions created" } th { "dropped" } th { "parked rows deleted" } th { "payloads cleared" } th { "result" } }
                    @for r in runs {
                        tr {
                            td { (time(&r.started_at)) }
                            td { (r.started_by) }
                            td.n { @if let Some(end) = r.finished_at { (format!("{:.1} s", (end - r.started_at).num_milliseconds() as f64 / 1000.0)) } }
                            td.n { (count(r.created)) } td.n { (count(r.dropped)) }
                            td.n { (count(r.parked_deleted)) } td.n { (count(r.payloads_cleared)) }
                            td { (run_outcome(r)) }
                        }
                    }
                }
                p.muted { "Each run of " code { "run" } " (start-up, hourly), " code { "inventory-inbox maintain" } " and " code { "migrate" } " is recorded; the database keeps the last " (crate::store::MAINTENANCE_RUNS_KEPT) "." }
            }
        }
    }
}

fn count(n: Option<i32>) -> String {
    n.map_or("–".to_owned(), |n| n.to_string())
}

/// A run's outcome in a few words.
fn run_outcome(r: &MaintenanceRun) -> String {
    match (&r.error, r.finished_at, r.locked) {
        (Some(error), _, _) => format!("failed: {error}"),
        (None, None, _) => "not finished: still running, or its process stopped".to_owned(),
        (None, Some(_), Some(false)) => "nothing done: another instance held the lock".to_owned(),
        (None, Some(_), _) => "ok".to_owned(),
    }
}

/// A run, its start, what started it, and its outcome with what it did.
fn run_result(r: &MaintenanceRun) -> String {
    let did = if r.did_the_work() {
        format!(
            "; partitions created {}, dropped {}; parked rows deleted {}, payloads cleared {}",
            count(r.created),
            count(r.dropped),
            count(r.parked_deleted),
            count(r.payloads_cleared)
        )
    } else {
        String::new()
    };
    format!(
        "started {} by {}: {}{did}.",
        time(&r.started_at),
        r.started_by,
        run_outcome(r)
    )
}

fn breaker_state(state: &Result<Option<BreakerState>, String>) -> Markup {
    html! {
        @match state {
            Err(why) => (failed(why)),
            Ok(None) => p.ok { "Not held; never opened." },
            Ok(Some(s)) if s.holds() => p.err {
                "HOLDS consumption since " (time(&s.opened_at)) ": " (s.reason) ". "
                a href="/breaker" { "Resume…" }
            },
            Ok(Some(s)) => p.ok {
                "Not held; last opened at " (time(&s.opened_at)) " (" (s.reason) "), resumed at "
                (s.resumed_at.as_ref().map(time).unwrap_or_default()) " by " (s.resumed_by.as_deref().unwrap_or("?")) "."
            },
        }
    }
}

/// The offset the consumer reads `p` from next: the database's position,
/// else the group's committed offset, else the log start; never before the
/// log start (what retention deleted is read from the earliest offset).
pub(super) fn reads_from(p: &PartitionOffsets, stored: &[Position]) -> i64 {
    stored
        .iter()
        .find(|s| s.partition == p.partition)
        .map(|s| s.next_offset)
        .or(p.committed)
        .unwrap_or(p.earliest)
        .max(p.earliest)
}

/// Lag in seconds of a partition read from `from`: 0 when read to its end,
/// else the age of its oldest unread record; `None` when that record's
/// timestamp is not known.
fn lag_seconds(
    p: &PartitionOffsets,
    from: i64,
    oldest_unread: &[(i32, i64)],
    now: DateTime<Utc>,
) -> Option<f64> {
    if from >= p.end {
        return Some(0.0);
    }
    let (_, at) = oldest_unread.iter().find(|(q, _)| *q == p.partition)?;
    Some(((now.timestamp_millis() - at).max(0)) as f64 / 1000.0)
}

fn partition_table(
    offsets: &Result<Vec<PartitionOffsets>, String>,
    stored: &Result<Vec<Position>, String>,
    ages: Option<(&OldestUnread, DateTime<Utc>)>,
) -> Markup {
    let show = |o: Option<i64>| o.map_or("–".to_owned(), |o| o.to_string());
    let no_stored = Vec::new();
    let stored_rows = stored.as_ref().unwrap_or(&no_stored);
    html! {
        @if let Some((Err(why), _)) = ages { (failed(why)) }
        @if let Err(why) = stored { (failed(why)) }
        @match offsets {
            Err(why) => {
                (failed(why))
                @if let Ok(stored) = stored {
                    table {
                        tr { th { "partition" } th { "position (database)" } th { "updated" } }
                        @for p in stored { tr { td.n { (p.partition) } td.n { (p.next_offset) } td { (time(&p.updated_at)) } } }
                    }
                }
            }
            Ok(offsets) => table {
                tr {
                    th { "partition" } th { "position (database)" } th { "earliest" } th { "end" } th { "group's committed" } th { "lag (records)" }
                    @if ages.is_some() { th { "lag (seconds)" } }
                    th { "updated" }
                }
                @for p in offsets {
                    @let position = stored_rows.iter().find(|s| s.partition == p.partition);
                    @let from = reads_from(p, stored_rows);
                    tr {
                        td.n { (p.partition) }
                        td.n { (show(position.map(|s| s.next_offset))) }
                        td.n { (p.earliest) }
                        td.n { (p.end) }
                        td.n { (show(p.committed)) }
                        td.n { ((p.end - from).max(0)) }
                        @if let Some((oldest, now)) = ages {
                            @let seconds = lag_seconds(p, from, oldest.as_ref().map(Vec::as_slice).unwrap_or_default(), now);
                            td.n data-lag-seconds-of=(p.partition) {
                                @match seconds { Some(s) => (format!("{s:.1}")), None => "–" }
                            }
                        }
                        td { (position.map(|s| time(&s.updated_at)).unwrap_or_else(|| "–".into())) }
                    }
                }
            },
        }
        p.muted {
            "Lag in records: the end offset less the offset the consumer reads next (the database's position, else the group's committed offset, else the log start). "
            @if ages.is_some() {
                "Lag in seconds: the age of the oldest record not applied yet (the one at that offset), by its Kafka timestamp, now; 0 when read to the end, – when its record could not be read in time. "
                "The consumer's own gauge, " code { "inbox_consumer_lag_seconds" } ", says the same of the records a member already holds."
            }
        }
    }
}

/// Outcomes drawn, with their colours.
const SERIES: [(&str, &str); 4] = [
    ("processed", "#3f8f5f"),
    ("business_duplicate", "#d9a400"),
    ("duplicate", "#7f8c9a"),
    ("parked", "#c0392b"),
];

/// Events per second by outcome, a stacked bar per minute of the hour
/// before `now`, as SVG.
pub fn chart(rates: &[OutcomeMinute], now: DateTime<Utc>) -> Markup {
    let (width, height, bar) = (720.0, 160.0, 12.0);
    let first = now.duration_trunc(Duration::minutes(1)).unwrap_or(now) - Duration::minutes(59);
    let mut per_minute: BTreeMap<i64, BTreeMap<&str, i64>> = BTreeMap::new();
    for rate in rates {
        let slot = (rate.minute - first).num_minutes();
        if (0..60).contains(&slot) {
            *per_minute
                .entry(slot)
                .or_default()
                .entry(rate.outcome.as_str())
                .or_default() += rate.events;
        }
    }
    let most = per_minute
        .values()
        .map(|m| m.values().sum::<i64>())
        .max()
        .unwrap_or(0);
    let top = (most as f64 / 60.0).max(1.0);
    let total: i64 = per_minute.values().flat_map(|m| m.values()).sum();
    html! {
        svg xmlns="http://www.w3.org/2000/svg" width=(width + 60.0) height=(height + 30.0) role="img" aria-label="events per second by outcome" {
            rect x="50" y="0" width=(width) height=(height) fill="#fff" stroke="#d6dae0" {}
            text x="45" y="12" text-anchor="end" font-size="11" { (format!("{top:.1}/s")) }
            text x="45" y=(height) text-anchor="end" font-size="11" { "0" }
            text x="50" y=(height + 14.0) font-size="11" { (first.format("%H:%M")) }
            text x=(50.0 + width) y=(height + 14.0) text-anchor="end" font-size="11" { (now.format("%H:%M UTC")) }
            @for (slot, outcomes) in &per_minute {
                @let x = 50.0 + *slot as f64 * bar;
                @let mut base = height;
                @for (name, colour) in SERIES {
                    @let events = outcomes.get(name).copied().unwrap_or(0);
                    @if events > 0 {
                        @let h = (events as f64 / 60.0) / top * height;
                        @let y = { base -= h; base };
                        rect x=(x + 1.0) y=(y) width=(bar - 2.0) height=(h) fill=(colour) {
                            title { (format!("{} {name}: {events} events ({:.2}/s)", (first + Duration::minutes(*slot)).format("%H:%M"), events as f64 / 60.0)) }
                        }
                    }
                }
            }
            @for (i, (name, colour)) in SERIES.iter().enumerate() {
                rect x=(60.0 + i as f64 * 170.0) y=(height + 19.0) width="10" height="10" fill=(colour) {}
                text x=(74.0 + i as f64 * 170.0) y=(height + 28.0) font-size="11" { (name) }
            }
        }
        p.muted { (total) " events in the hour, as the consumer's members counted them after each batch's commit (added every 10 s; replays by an operator are not counted)." }
    }
}

pub struct ParkedPage<'a> {
    pub standing: &'a Standing,
    pub filter: &'a ParkedFilter,
    pub wrong: &'a [String],
    pub groups: Result<Vec<ParkedGroup>, String>,
    pub list: Result<Vec<ParkedEntry>, String>,
    pub page_records: i64,
}

/// The query string of a filter, with `after` as given.
fn filter_query(filter: &ParkedFilter, after: Option<i64>) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    if let Some(reason) = filter.reason {
        query.append_pair("reason", reason.as_str());
    }
    if let Some(day) = filter.day {
        query.append_pair("day", &day.to_string());
    }
    if let Some(order) = &filter.order {
        query.append_pair("order", order);
    }
    if let Some(sku) = &filter.sku {
        query.append_pair("sku", sku);
    }
    if let Some(partition) = filter.partition {
        query.append_pair("partition", &partition.to_string());
    }
    if let Some(after) = after {
        query.append_pair("after", &after.to_string());
    }
    query.finish()
}

pub fn parked(p: &ParkedPage<'_>) -> Markup {
    let signed_in = p.standing.signed_in();
    let f = p.filter;
    html! {
        h2 { "By reason and day" }
        @match &p.groups {
            Err(why) => (failed(why)),
            Ok(groups) if groups.is_empty() => p.ok { "Nothing is parked." },
            Ok(groups) => table {
                tr { th { "day (UTC)" } th { "reason" } th { "records" } th {} }
                @for g in groups {
                    tr {
                        td { (g.day) }
                        td { a href=(format!("/parked?reason={}&day={}", g.reason, g.day)) { (g.reason) } }
                        td.n { (g.count.to_string()) }
                        td {
                            @if signed_in {
                                form.inline method="post" action="/parked/replay" {
                                    (csrf_field(p.standing))
                                    input type="hidden" name="reason" value=(g.reason);
                                    input type="hidden" name="day" value=(g.day);
                                    button type="submit" { "Replay group…" }
                                }
                            }
                        }
                    }
                }
            },
        }
        h2 { "Records" }
        @for wrong in p.wrong { p.err { "Filter ignored: " (wrong) } }
        form method="get" action="/parked" {
            select name="reason" {
                option value="" { "any reason" }
                @for r in ParkReason::ALL {
                    option value=(r.as_str()) selected[f.reason == Some(r)] { (r.as_str()) }
                }
            }
            " day " input type="date" name="day" value=(f.day.map(|d| d.to_string()).unwrap_or_default());
            " order " input type="text" name="order" size="14" value=(f.order.clone().unwrap_or_default());
            " SKU " input type="text" name="sku" size="10" value=(f.sku.clone().unwrap_or_default());
            " partition " input type="number" name="partition" min="0" style="width:5em" value=(f.partition.map(|p| p.to_string()).unwrap_or_default());
            " " button type="submit" { "Filter" }
            " " a href="/parked" { "clear" }
        }
        @match &p.list {
            Err(why) => (failed(why)),
            Ok(list) if list.is_empty() => p { "No parked record matches" @if f.after_id.is_some() { " after id " (f.after_id.unwrap_or_default()) } "." },
            Ok(list) => {
                form method="post" action="/parked/replay" {
                    (csrf_field(p.standing))
                    table {
                        tr {
                            @if signed_in { th {} }
                            th { "id" } th { "parked at" } th { "reason" } th { "record" } th { "order" } th { "error" } th { "replay" }
                        }
                        @for e in list {
                            tr {
                                @if signed_in { td { input type="checkbox" name="id" value=(e.id); } }
                                td.n { a href=(format!("/parked/{}", e.id)) { (e.id) } }
                                td { (time(&e.parked_at)) }
                                td { (e.reason) }
                                td { (search_link(&format!("{}:{}", e.partition, e.offset))) }
                                td { @if let Some(order) = &e.order_id { (search_link(order)) } }
                                td { (e.error) }
                                td { (e.replay_outcome.clone().unwrap_or_default()) }
                            }
                        }
                    }
                    @if signed_in { button type="submit" { "Replay selected…" } }
                }
                @if list.len() as i64 >= p.page_records {
                    p { a href=(format!("/parked?{}", filter_query(f, list.last().map(|e| e.id)))) { "Next " (p.page_records) " →" } }
                }
                @if f.after_id.is_some() { p { a href=(format!("/parked?{}", filter_query(f, None))) { "← first page" } } }
            }
        }
    }
}

pub fn record(id: i64, found: Result<Option<ParkedRecord>, String>, standing: &Standing) -> Markup {
    let record = match found {
        Err(why) => return failed(&why),
        Ok(None) => return message(&format!("No parked record {id} for this consumer.")),
        Ok(Some(record)) => record,
    };
    let e = &record.entry;
    html! {
        table {
            tr { th { "id" } td { (e.id) } }
            tr { th { "reason" } td { (e.reason) } }
            tr { th { "error" } td { (e.error) } }
            tr { th { "parked at" } td { (time(&e.parked_at)) } }
            tr { th { "record" } td { (e.topic) " " (search_link(&format!("{}:{}", e.partition, e.offset))) } }
            tr { th { "event" } td { @match e.message_id { Some(id) => (search_link(&id.to_string())), None => span.muted { "no valid id" } } } }
            tr { th { "order" } td { @if let Some(order) = &e.order_id { (search_link(order)) } } }
            tr { th { "trace" } td { (e.trace_id.clone().unwrap_or_default()) } }
            tr { th { "DLQ copy" } td {
                // The parking statement sets dlq_sent_at to its own now()
                // (parked_at's) when no copy is owed; a copy is marked sent
                // after that transaction, later.
                @match record.dlq_sent_at {
                    None => { "owed: the consumer that owns partition " (e.partition) " sends it" }
                    Some(at) if at == e.parked_at => { "none owed: parked by a consumer without a DLQ topic (DLQ_TOPIC empty)" }
                    Some(at) => { "copied to the DLQ topic at " (time(&at)) }
                }
            } }
            tr { th { "replay" } td {
                @match (&e.replayed_at, &e.replay_outcome) {
                    (Some(at), Some(outcome)) => { "replayed at " (time(at)) ": " (outcome) }
                    (None, Some(outcome)) => { "last replay: " (outcome) " (still eligible)" }
                    _ => { "never replayed" }
                }
            } }
        }
        h2 { "Replays" }
        @if record.replays.is_empty() {
            p.muted { "Never replayed." }
        } @else {
            table {
                tr { th { "at" } th { "outcome" } th { "by" } }
                @for r in &record.replays {
                    tr { td { (time(&r.at)) } td { (r.outcome) } td { (r.by) } }
                }
            }
            p.muted { "Every replay of this record, oldest first (the last " (crate::store::REPLAYS_KEPT) " are kept, with the record)." }
        }
        @if standing.signed_in() {
            h2 { "Headers (secrets redacted)" }
            pre { (redacted_headers(&record.headers_json)) }
            h2 { "Payload" }
            @match &record.payload {
                None => p.muted { "Cleared (INBOX_PARKED_PAYLOAD_DAYS)." },
                Some(payload) => {
                    p.muted { (payload.len()) " bytes" @if payload.len() > PAYLOAD_SHOWN { ", the first " (PAYLOAD_SHOWN) " shown" } "." }
                    pre { (String::from_utf8_lossy(&payload[..payload.len().min(PAYLOAD_SHOWN)])) }
                }
            }
            form method="post" action="/parked/replay" {
                (csrf_field(standing))
                input type="hidden" name="id" value=(e.id);
                button type="submit" { "Replay…" }
            }
        } @else {
            p.muted { "Payload and headers are shown after signing in." }
        }
    }
}

/// The stored headers, redacted again (a header stored before a marker
/// was added is redacted now too), one per line.
fn redacted_headers(json: &str) -> String {
    crate::parked::redacted(&crate::parked::headers_from_json(json))
        .into_iter()
        .map(|h| {
            format!(
                "{}: {}",
                h.key,
                h.value
                    .as_deref()
                    .map(String::from_utf8_lossy)
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn search(query: &str, found: Option<Result<Inspection, String>>) -> Markup {
    html! {
        form method="get" action="/search" {
            input type="text" name="q" size="48" value=(query) placeholder="event id, order id, or partition:offset";
            " " button type="submit" { "Inspect" }
        }
        p.muted { "The verdict of " code { "inventory-inbox inspect" } ", from the same function." }
        @match found {
            None => {},
            Some(Err(why)) => (failed(&why)),
            Some(Ok(found)) => (inspection(&found)),
        }
    }
}

fn inspection(found: &Inspection) -> Markup {
    html! {
        p.verdict { (found.verdict) }
        @if !found.ledger.is_empty() {
            h2 { "Ledger" }
            table {
                tr { th { "event" } th { "day" } th { "record" } th { "status" } th { "order" } th { "processed at" } }
                @for l in &found.ledger {
                    tr {
                        td { (search_link(&l.message_id.to_string())) }
                        td { (l.event_day) }
                        td { (search_link(&format!("{}:{}", l.kafka_partition, l.kafka_offset))) }
                        td { (l.status) }
                        td { (search_link(&l.order_id)) }
                        td { (time(&l.processed_at)) }
                    }
                }
            }
        }
        @if !found.lines.is_empty() {
            h2 { "Order lines" }
            table {
                tr { th { "order" } th { "SKU" } th { "quantity" } th { "status" } th { "by event" } }
                @for l in &found.lines {
                    tr { td { (search_link(&l.order_id)) } td { (l.sku) } td.n { (l.quantity) } td { (l.status) } td { (search_link(&l.message_id.to_string())) } }
                }
            }
        }
        @if !found.parked.is_empty() {
            h2 { "Parked" }
            table {
                tr { th { "id" } th { "record" } th { "reason" } th { "error" } th { "parked at" } th { "replay" } }
                @for p in &found.parked {
                    tr {
                        td { a href=(format!("/parked/{}", p.id)) { (p.id) } }
                        td { (search_link(&format!("{}:{}", p.kafka_partition, p.kafka_offset))) }
                        td { (p.reason) } td { (p.error) } td { (time(&p.parked_at)) }
                        td { (p.replay_outcome.clone().unwrap_or_default()) }
                    }
                }
            }
        }
        @if let Some(record) = &found.record {
            p { "Record in the topic: " strong { (record.state.name()) } }
        }
        @if let Some(position) = found.position {
            p { "Position: " (position) " (the next offset this consumer reads)." }
        }
    }
}

pub fn positions(
    topic: &str,
    offsets: Result<Vec<PartitionOffsets>, String>,
    stored: Result<Vec<Position>, String>,
    standing: &Standing,
) -> Markup {
    let partitions: Vec<i32> = offsets
        .as_ref()
        .map(|o| o.iter().map(|p| p.partition).collect())
        .unwrap_or_default();
    html! {
        p.muted { "Topic " code { (topic) } "." }
        (partition_table(&offsets, &stored, None))
        @if standing.signed_in() && !partitions.is_empty() {
            h2 { "Set positions" }
            form method="post" action="/positions/set" {
                (csrf_field(standing))
                p { "Partitions (none ticked: all): "
                    @for p in &partitions { label { input type="checkbox" name="partition" value=(p); (p) } " " }
                }
                p { "To: "
                    select name="offset" {
                        option value="earliest" { "earliest (re-read all the topic holds)" }
                        option value="latest" { "latest (skip everything not read yet)" }
                        option value="kafka" { "the group's committed offsets" }
                    }
                    " or offset " input type="number" name="at" min="0" style="width:8em";
                    " " button type="submit" { "Set…" }
                }
            }
            p.muted { "A running consumer reads a moved partition from there within 10 s (a batch of it in flight is refused, not applied), a stopped one when it starts; as " code { "inventory-inbox positions set" } "." }
        }
    }
}

/// The form's fields again, as hidden inputs, with `confirm=yes`.
fn confirmed_form(action: &str, asked: &Asked, standing: &Standing, button: &str) -> Markup {
    html! {
        form method="post" action=(action) {
            @for (name, value) in &asked.fields {
                @if name != "csrf" && name != "confirm" && !value.trim().is_empty() {
                    input type="hidden" name=(name) value=(value);
                }
            }
            (csrf_field(standing))
            input type="hidden" name="confirm" value="yes";
            button.danger type="submit" { (button) }
            " " a href="/" { "cancel" }
        }
    }
}

/// The group a replay form names, in words; `None`: it names records.
pub fn group_in_words(asked: &Asked) -> Option<String> {
    asked
        .field("reason")
        .map(|reason| match asked.field("day") {
            Some(day) => format!("every unreplayed record of reason {reason} parked on {day}"),
            None => format!("every unreplayed record of reason {reason}"),
        })
}

pub fn confirm_replay(
    asked: &Asked,
    ids: &[i64],
    standing: &Standing,
    in_request: usize,
) -> Markup {
    let group = group_in_words(asked);
    html! {
        @if ids.is_empty() {
            (message("Nothing to replay: every record of the group was replayed already."))
        } @else {
            p.warn {
                "Replay " strong { (ids.len()) " parked record(s)" }
                @if let Some(group) = &group { " (" (group) ")" }
                " through the normal path? Each is applied at most once; one still not applicable stays parked and says why."
            }
            @if ids.len() > in_request {
                p { "More than " (in_request) " records: the replay runs beside the console, one record at a time, and its page shows how far it got until it ends (one group replay at a time)." }
            }
            p.muted { "Ids: " (ids.iter().take(IDS_NAMED).map(|id| id.to_string()).collect::<Vec<_>>().join(", ")) @if ids.len() > IDS_NAMED { ", …" } }
            (confirmed_form("/parked/replay", asked, standing, &format!("Replay {} record(s)", ids.len())))
        }
    }
}

pub fn replayed(outcomes: &[(i64, Result<ReplayOutcome, String>)]) -> Markup {
    let count = |f: fn(&ReplayOutcome) -> bool| {
        outcomes
            .iter()
            .filter(|(_, o)| o.as_ref().is_ok_and(f))
            .count()
    };
    let applied = count(|o| *o == ReplayOutcome::Applied);
    let duplicate = count(|o| *o == ReplayOutcome::Duplicate);
    let still = count(|o| matches!(o, ReplayOutcome::StillParked(..)));
    html! {
        p.ok { "Replayed " (outcomes.len()) " record(s): " (applied) " applied, " (duplicate) " duplicate, " (still) " still parked." }
        table {
            tr { th { "id" } th { "outcome" } }
            @for (id, outcome) in outcomes {
                tr {
                    td { a href=(format!("/parked/{id}")) { (id) } }
                    td { @match outcome { Ok(o) => (o.to_string()), Err(why) => span.err { "failed, the rest not replayed: " (why) } } }
                }
            }
        }
        p { a href="/parked" { "Back to the parked records" } }
    }
}

/// A group replay running beside the requests, or ended: how far it got.
pub fn group_replay(job: &GroupReplay, p: &Progress) -> Markup {
    let share = if job.total == 0 {
        100.0
    } else {
        p.replayed as f64 * 100.0 / job.total as f64
    };
    html! {
        p { "Replay of " (job.group) ", " (job.total) " record(s), asked " (time(&job.started_at)) " (" (job.by) ")." }
        @let counts = format!("{} of {} replayed ({share:.0} %): {} applied, {} duplicate, {} still parked.", p.replayed, job.total, p.applied, p.duplicate, p.still_parked);
        @match (&p.failed, p.finished_at, p.stopped) {
            (Some((id, why)), _, _) => p.err { (counts) " Stopped at record " a href=(format!("/parked/{id}")) { (id) } ", whose replay failed (the rest not replayed): " (why) },
            (None, Some(_), true) => p.warn { (counts) " Stopped by the console's end: the rest stays parked; replay the group again." },
            (None, Some(at), false) => p.ok { (counts) " Ended " (time(&at)) "." },
            (None, None, _) => p.warn { (counts) " Running; this page reloads every 2 s." },
        }
        progress max=(job.total.max(1)) value=(p.replayed) { (format!("{share:.0} %")) }
        @if !p.still_parked_named.is_empty() {
            h2 { "Still parked" }
            table {
                tr { th { "id" } th { "why" } }
                @for (id, why) in &p.still_parked_named {
                    tr { td { a href=(format!("/parked/{id}")) { (id) } } td { (why) } }
                }
            }
            @if p.still_parked > p.still_parked_named.len() { p.muted { "… and " (p.still_parked - p.still_parked_named.len()) " more (Parked lists them)." } }
        }
        p { a href="/parked" { "Back to the parked records" } }
    }
}

pub fn confirm_positions(asked: &Asked, planned: &[PlannedMove], standing: &Standing) -> Markup {
    let reread: i64 = planned.iter().map(PlannedMove::reread).sum();
    let skipped: i64 = planned.iter().map(PlannedMove::skipped).sum();
    let moving = planned.iter().filter(|m| m.target.is_some()).count();
    html! {
        p.warn {
            "Move " strong { (moving) " partition(s)" } ": " strong { (reread) " record(s) read again" } " and " strong { (skipped) " record(s) skipped" } ". "
            "Records read again are not applied twice (the ledger), but skipped ones are never applied."
        }
        table {
            tr { th { "partition" } th { "read from now" } th { "to" } th { "re-read" } th { "skipped" } }
            @for m in planned {
                tr {
                    td.n { (m.partition) } td.n { (m.reads_from) }
                    td.n { @match m.target { Some(t) => (t), None => span.muted { "unchanged: no committed offset" } } }
                    td.n { (m.reread()) } td.n { (m.skipped()) }
                }
            }
        }
        p.muted { "A running consumer reads a moved partition from there within 10 s (a batch of it in flight is refused, not applied), a stopped one when it starts." }
        (confirmed_form("/positions/set", asked, standing, &format!("Move {moving} partition(s)")))
    }
}

pub fn positions_moved(moved: &[PlannedMove]) -> Markup {
    html! {
        p.ok { (moved.len()) " position(s) set." }
        table {
            tr { th { "partition" } th { "before (database)" } th { "now" } }
            @for m in moved {
                tr { td.n { (m.partition) } td.n { (m.before.map_or("none".to_owned(), |b| b.to_string())) } td.n { (m.target.unwrap_or_default()) } }
            }
        }
        p { a href="/positions" { "Back to the positions" } }
    }
}

pub fn breaker(state: Result<Option<BreakerState>, String>, standing: &Standing) -> Markup {
    let holds = matches!(&state, Ok(Some(s)) if s.holds());
    html! {
        (breaker_state(&state))
        @if holds && standing.signed_in() {
            form method="post" action="/breaker/resume" {
                (csrf_field(standing))
                button type="submit" { "Resume…" }
            }
        }
        p.muted { "While it holds, every consumer of this name takes no records; those after the trip wait in Kafka, nothing is skipped. Fix the cause (see Parked), then resume." }
    }
}

pub fn confirm_resume(state: Option<BreakerState>, standing: &Standing) -> Markup {
    html! {
        @match state {
            Some(s) if s.holds() => {
                p.warn { "Resume consumption? The breaker holds since " (time(&s.opened_at)) ": " (s.reason) ". Every consumer takes records again within seconds, from where it stopped." }
                form method="post" action="/breaker/resume" {
                    (csrf_field(standing))
                    input type="hidden" name="confirm" value="yes";
                    button.danger type="submit" { "Resume" }
                }
            }
            _ => (message("The breaker does not hold: nothing to resume.")),
        }
    }
}

pub fn resumed(resumed: Option<BreakerState>) -> Markup {
    html! {
        @match resumed {
            Some(s) => p.ok { "Resumed (held since " (time(&s.opened_at)) ": " (s.reason) "); the consumers take records again within seconds." },
            None => (message("Not held; nothing to resume.")),
        }
        p { a href="/breaker" { "Back to the breaker" } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chart_stacks_each_minutes_outcomes_as_events_per_second() {
        let now = DateTime::parse_from_rfc3339("2026-12-06T12:30:20Z")
            .unwrap()
            .with_timezone(&Utc);
        let minute = |m: u32| {
            DateTime::parse_from_rfc3339(&format!("2026-12-06T12:{m:02}:00Z"))
                .unwrap()
                .with_timezone(&Utc)
        };
        let rates = [
            OutcomeMinute {
                minute: minute(30),
                outcome: "processed".into(),
                events: 120,
            },
            OutcomeMinute {
                minute: minute(30),
                outcome: "parked".into(),
                events: 60,
            },
            // Before the hour: left out.
            OutcomeMinute {
                minute: minute(0) - Duration::hours(1),
                outcome: "processed".into(),
                events: 999,
            },
        ];
        let svg = chart(&rates, now).into_string();
        assert!(
            svg.contains("3.0/s"),
            "the top is 180 events a minute: {svg}"
        );
        assert!(
            svg.contains("12:30 processed: 120 events (2.00/s)"),
            "{svg}"
        );
        assert!(svg.contains("12:30 parked: 60 events (1.00/s)"), "{svg}");
        assert!(svg.contains("180 events in the hour"), "{svg}");
    }

    #[test]
    fn lag_in_seconds_is_the_age_of_the_oldest_unread_record() {
        let now = DateTime::parse_from_rfc3339("2026-12-06T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let partition = |partition, end| PartitionOffsets {
            partition,
            earliest: 10,
            end,
            committed: Some(12),
        };
        let position = |partition, next_offset| Position {
            topic: "orders.placed.v1".into(),
            partition,
            next_offset,
            updated_at: now,
        };
        // The database's position wins over the group's commit; never
        // before the log start.
        assert_eq!(reads_from(&partition(0, 20), &[position(0, 15)]), 15);
        assert_eq!(reads_from(&partition(0, 20), &[position(1, 15)]), 12);
        assert_eq!(reads_from(&partition(0, 20), &[position(0, 3)]), 10);
        let oldest = [(0, now.timestamp_millis() - 90_500)];
        assert_eq!(lag_seconds(&partition(0, 20), 15, &oldest, now), Some(90.5));
        assert_eq!(lag_seconds(&partition(0, 15), 15, &oldest, now), Some(0.0));
        assert_eq!(lag_seconds(&partition(1, 20), 15, &oldest, now), None);
    }

    #[test]
    fn the_overview_says_when_maintenance_last_did_its_work() {
        let now = DateTime::parse_from_rfc3339("2026-12-06T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let run = |id, hours_ago, error: Option<&str>| MaintenanceRun {
            id,
            started_at: now - Duration::hours(hours_ago),
            started_by: "run: hourly".into(),
            finished_at: Some(now - Duration::hours(hours_ago)),
            locked: error.is_none().then_some(true),
            created: error.is_none().then_some(1),
            dropped: error.is_none().then_some(1),
            parked_deleted: error.is_none().then_some(0),
            payloads_cleared: error.is_none().then_some(0),
            error: error.map(str::to_owned),
        };
        let page =
            maintenance(&[run(2, 1, Some("lock timeout")), run(1, 5, None)], now).into_string();
        assert!(
            page.contains("class=\"err\">Last run: started 2026-12-06 11:00:00 UTC by run: hourly: failed: lock timeout."),
            "{page}"
        );
        assert!(
            page.contains("The last that did the work: started 2026-12-06 07:00:00 UTC by run: hourly: ok; partitions created 1, dropped 1"),
            "{page}"
        );
        assert!(page.contains("No run did the work for 5 hours"), "{page}");
        let fine = maintenance(&[run(3, 0, None)], now).into_string();
        assert!(fine.contains("class=\"ok\">Last run:"), "{fine}");
        assert!(!fine.contains("No run did the work"), "{fine}");
        assert!(maintenance(&[], now)
            .into_string()
            .contains("No maintenance run is recorded"));
    }

    #[test]
    fn secret_headers_stay_redacted_on_the_page() {
        let json = r#"{"ce_id":"abc","authorization":"Bearer hunter2"}"#;
        let shown = redacted_headers(json);
        assert!(shown.contains("ce_id: abc"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
