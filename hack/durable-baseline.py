#!/usr/bin/env python3
"""A durable consume-once baseline on SQLite, to set actgate's permit path against.

Each permit is one transaction, committed durably before the caller counts it done: the lease
(the authority) is marked consumed only if it is still issued — a compare-and-swap, so a lease is
consumed at most once — and a journal row (the DISPATCH_PENDING record, with a receipt of the
size actgate writes) is inserted, then COMMIT. The database runs in WAL mode with
synchronous=FULL: every commit fsyncs the write-ahead log before it returns, so a permit counted
here survives a crash, as actgate's does. SQLite admits one writer at a time; concurrent callers
take a process-wide lock around the transaction (what an application with one database does),
not SQLite's busy handler, whose sleeps would measure the handler and not the disk.

Standard library only (python3 3.11). Leases are issued before the clock starts, in one commit per
caller; only the consume transactions are timed. Closed loop: each caller starts its next permit
when the last one committed. Reported per concurrency: permits, permits/s, p50/p99/max in ms.

    python3 hack/durable-baseline.py --callers 1,64 --duration 5
    python3 hack/durable-baseline.py --callers 1 --duration 5 --json

docs/performance.md "Durable permits against SQLite" has the figures and how they were run.
"""

import argparse
import json
import os
import secrets
import sqlite3
import sys
import tempfile
import threading
import time

SCHEMA = """
CREATE TABLE leases (
    id          TEXT PRIMARY KEY,
    payload     BLOB NOT NULL,
    state       TEXT NOT NULL,
    consumed_at INTEGER,
    consumed_by TEXT
);
CREATE TABLE journal (
    op_id      TEXT PRIMARY KEY,
    lease_id   TEXT NOT NULL UNIQUE,
    act_id     TEXT NOT NULL,
    state      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    record     BLOB NOT NULL
);
CREATE INDEX journal_by_state ON journal (state, created_at);
CREATE INDEX journal_by_act ON journal (act_id);
"""

# Sizes of what actgate writes per permit: a signed authority of about 600 bytes, a dispatch
# record with its dispatch receipt of about 1.2 KB.
PAYLOAD_SIZE = 600
RECORD_SIZE = 1200


def open_db(path):
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
    mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode.lower() != "wal":
        raise SystemExit(f"durable-baseline: journal_mode is {mode}, want wal")
    db.execute("PRAGMA synchronous=FULL")
    if db.execute("PRAGMA synchronous").fetchone()[0] != 2:
        raise SystemExit("durable-baseline: synchronous is not FULL")
    return db


def issue(db, n):
    """Issues n leases in one commit (untimed) and returns their ids."""
    ids = [secrets.token_hex(16) for _ in range(n)]
    db.execute("BEGIN IMMEDIATE")
    db.executemany(
        "INSERT INTO leases (id, payload, state) VALUES (?, ?, 'issued')",
        ((i, secrets.token_bytes(PAYLOAD_SIZE)) for i in ids),
    )
    db.execute("COMMIT")
    return ids


def consume(db, lease_id):
    """The timed transaction: consume the lease once and journal the dispatch, one commit."""
    op = "op-" + secrets.token_hex(16)
    now = time.time_ns()
    db.execute("BEGIN IMMEDIATE")
    try:
        cur = db.execute(
            "UPDATE leases SET state='consumed', consumed_at=?, consumed_by=? WHERE id=? AND state='issued'",
            (now, op, lease_id),
        )
        if cur.rowcount != 1:
            raise RuntimeError(f"lease {lease_id} not consumable")
        db.execute(
            "INSERT INTO journal (op_id, lease_id, act_id, state, created_at, record) VALUES (?, ?, ?, 'DISPATCH_PENDING', ?, ?)",
            (op, lease_id, "act-" + lease_id, now, secrets.token_bytes(RECORD_SIZE)),
        )
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def percentile(sorted_lat, q):
    if not sorted_lat:
        return 0.0
    return sorted_lat[min(len(sorted_lat) - 1, int(q * len(sorted_lat)))]


def run(path, callers, duration):
    setup = open_db(path)
    setup.executescript(SCHEMA)
    # Enough leases for a generous rate; a caller that runs out stops early and says so.
    per_caller = max(2000, int(40000 * duration / callers))
    leases = [issue(setup, per_caller) for _ in range(callers)]
    setup.close()

    db = open_db(path)  # one connection, one writer at a time (see the module's docstring)
    lock = threading.Lock()
    lat = [[] for _ in range(callers)]
    ran_out = []
    start_evt = threading.Event()
    deadline = [0.0]

    def worker(i):
        mine, out = leases[i], lat[i]
        start_evt.wait()
        for lease in mine:
            t0 = time.perf_counter()
            if t0 >= deadline[0]:
                return
            with lock:
                consume(db, lease)
            out.append(time.perf_counter() - t0)
        ran_out.append(i)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(callers)]
    for t in threads:
        t.start()
    t_start = time.perf_counter()
    deadline[0] = t_start + duration
    start_evt.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t_start
    # Every permit counted is in the journal, and every lease consumed at most once.
    n = sum(len(x) for x in lat)
    rows = db.execute("SELECT count(*) FROM journal").fetchone()[0]
    consumed = db.execute("SELECT count(*) FROM leases WHERE state='consumed'").fetchone()[0]
    db.close()
    if rows != n or consumed != n:
        raise SystemExit(f"durable-baseline: {n} permits counted, {rows} journal rows, {consumed} leases consumed")
    all_lat = sorted(x for l in lat for x in l)
    return {
        "callers": callers,
        "permits": n,
        "seconds": round(elapsed, 3),
        "permits_per_s": round(n / elapsed, 1),
        "p50_ms": round(percentile(all_lat, 0.50) * 1e3, 3),
        "p99_ms": round(percentile(all_lat, 0.99) * 1e3, 3),
        "max_ms": round(all_lat[-1] * 1e3, 3) if all_lat else 0.0,
        "ran_out": bool(ran_out),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--callers", default="1,64", help="comma-separated concurrencies")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per concurrency")
    ap.add_argument("--dir", default=None, help="directory for the databases (default: a temporary one under $TMPDIR)")
    ap.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    args = ap.parse_args()
    try:
        callers = [int(c) for c in args.callers.split(",") if c.strip()]
    except ValueError:
        ap.error("--callers: comma-separated positive integers")
    if not callers or any(c < 1 or c > 1024 for c in callers):
        ap.error("--callers: each between 1 and 1024")
    if not 0 < args.duration <= 3600:
        ap.error("--duration: more than 0, at most 3600 seconds")

    with tempfile.TemporaryDirectory(prefix="durable-baseline-", dir=args.dir) as d:
        if not args.json:
            print(f"sqlite {sqlite3.sqlite_version}, WAL, synchronous=FULL, one commit per permit; dir {d}")
            print(f"{'callers':>7} {'permits':>8} {'permits/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        for c in callers:
            r = run(os.path.join(d, f"c{c}.db"), c, args.duration)
            if args.json:
                print(json.dumps(r), flush=True)
            else:
                print(f"{r['callers']:>7} {r['permits']:>8} {r['permits_per_s']:>10} {r['p50_ms']:>8} {r['p99_ms']:>8} {r['max_ms']:>8}"
                      + ("  (ran out of leases)" if r["ran_out"] else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
