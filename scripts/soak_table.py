"""Summarises `make soak` (scripts/soak.sh): per minute the size of each
table, the WAL written and the consumer's batch p95; per simulated day the
generator's reconciliation and end-to-end latency. Writes soak.json, prints
two tables, and exits 1 when a day failed reconciliation or a table's size
did not level off (its largest size in the last third of the soak more than
10 % above its largest before)."""
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

out, days, day_seconds = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
TABLES = ("processed_inbox", "order_reservation", "inbox_parked", "inventory_stock", "inbox_position",
          "inbox_ledger_filter_chunk", "inbox_ledger_filter_slot")
GROWING = ("processed_inbox", "order_reservation", "inbox_parked", "inbox_ledger_filter_chunk",
           "inbox_ledger_filter_slot")

sizes = defaultdict(dict)  # minute -> table -> (bytes, rows)
wal = {}
buckets = defaultdict(dict)  # minute -> le -> count
for line in (out / "samples.txt").read_text().splitlines():
    parts = line.split()
    if len(parts) < 3:
        continue
    kind, at = parts[0], int(parts[1])
    if kind == "size" and len(parts) == 8:
        table, heap, index, rows = parts[2], int(parts[3]), int(parts[4]), int(parts[5])
        if table == "wal":
            wal[at] = heap
        else:
            sizes[at][table] = (heap + index, rows)
    elif kind == "metric":
        le = parts[2].split('le="')[1].split('"')[0]
        buckets[at][float("inf") if le == "+Inf" else float(le)] = float(parts[3])


def p95(before, after):
    """The 95th percentile (upper bucket bound, ms) of the batches between two scrapes."""
    if not before or not after:
        return None
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1]
    if total <= 0:
        return None
    for bound, count in zip(bounds, counts):
        if count >= 0.95 * total:
            return bound * 1000 if bound != float("inf") else None
    return None


instants = sorted(sizes)
start = instants[0] if instants else 0
minutes = []
for i, at in enumerate(instants):
    previous = instants[i - 1] if i else None
    minutes.append({
        "minute": round((at - start) / 60),
        "simulated_day": (at - start) // day_seconds,
        "bytes": {t: sizes[at].get(t, (0, 0))[0] for t in TABLES},
        "rows": {t: sizes[at].get(t, (0, 0))[1] for t in TABLES},
        "wal_bytes": (wal[at] - wal[previous]) if previous in wal and at in wal else None,
        "batch_p95_ms": p95(buckets.get(previous), buckets.get(at)) if previous else None,
    })

reports = []
for day in range(days):
    path = out / f"day_{day}.json"
    if not path.exists():
        reports.append({"day": day, "ok": False, "missing": True})
        continue
    report = json.loads(path.read_text())
    e2e = report.get("e2e_latency_ms") or {}
    reports.append({
        "day": day,
        "ok": report["reconciliation"]["ok"],
        "unique_events": report.get("unique_events"),
        "doubled_events": report["reconciliation"]["doubled_events"],
        "lost_events": report["reconciliation"]["lost_events"],
        "e2e_p95_ms": e2e.get("p95"),
        "e2e_p99_ms": e2e.get("p99"),
    })

level = {}
third = len(minutes) // 3
for table in GROWING:
    before = max((m["bytes"][table] for m in minutes[: len(minutes) - third]), default=0)
    last = max((m["bytes"][table] for m in minutes[len(minutes) - third:]), default=0)
    level[table] = {"largest_before_last_third": before, "largest_in_last_third": last,
                    "levels_off": before > 0 and last <= 1.10 * before}

# The owner's maintenance (every minute): the indexes of closed days it rebuilt.
compacted = {"indexes": 0, "bytes_before": 0, "bytes_after": 0, "runs": 0}
maintain_log = out / "maintain.log"
for line in (maintain_log.read_text().splitlines() if maintain_log.exists() else []):
    compacted["runs"] += 1
    found = re.search(r"compacted: (\d+) \((\d+) -> (\d+) bytes\)", line)
    if found:
        compacted["indexes"] += int(found.group(1))
        compacted["bytes_before"] += int(found.group(2))
        compacted["bytes_after"] += int(found.group(3))

summary = {
    "days": days,
    "owner_maintenance": compacted,
    "day_seconds": day_seconds,
    "minutes": minutes,
    "days_reconciled": reports,
    "level_off": level,
    "all_reconciled": all(r["ok"] for r in reports),
    "events": sum(r.get("unique_events") or 0 for r in reports),
}
(out / "soak.json").write_text(json.dumps(summary, indent=2))

mb = lambda b: f"{b / 1e6:,.0f}"
print("| minute | day | ledger MB (rows) | reservations MB (rows) | parked MB (rows) | stock MB | WAL MB/min | batch p95 ms |")
print("|---|---|---|---|---|---|---|---|")
for m in minutes:
    b, r = m["bytes"], m["rows"]
    print(f"| {m['minute']} | {m['simulated_day']} "
          f"| {mb(b['processed_inbox'])} ({r['processed_inbox']:,}) "
          f"| {mb(b['order_reservation'])} ({r['order_reservation']:,}) "
          f"| {mb(b['inbox_parked'])} ({r['inbox_parked']:,}) "
          f"| {b['inventory_stock'] / 1e6:.1f} "
          f"| {'-' if m['wal_bytes'] is None else mb(m['wal_bytes'])} "
          f"| {'-' if m['batch_p95_ms'] is None else format(m['batch_p95_ms'], '.0f')} |")
print()
print("| day | reconciled | unique events | doubled / lost | e2e p95 / p99 ms |")
print("|---|---|---|---|---|")
for r in reports:
    if r.get("missing"):
        print(f"| {r['day']} | no report | - | - | - |")
        continue
    p95s = "-" if r["e2e_p95_ms"] is None else f"{r['e2e_p95_ms']:.1f} / {r['e2e_p99_ms']:.1f}"
    print(f"| {r['day']} | {'yes' if r['ok'] else 'NO'} | {r['unique_events']:,} "
          f"| {r['doubled_events']} / {r['lost_events']} | {p95s} |")
print()
for table, figures in level.items():
    print(f"{table}: largest {mb(figures['largest_before_last_third'])} MB before the last third, "
          f"{mb(figures['largest_in_last_third'])} MB in it: "
          f"{'levels off' if figures['levels_off'] else 'DOES NOT level off'}")
print(f"owner's maintenance: {compacted['runs']} runs, {compacted['indexes']} indexes of closed days "
      f"compacted, {mb(compacted['bytes_before'])} -> {mb(compacted['bytes_after'])} MB")
ok = summary["all_reconciled"] and all(f["levels_off"] for f in level.values())
sys.exit(0 if ok else 1)
