#!/usr/bin/env python3
"""Interleaved rounds of actgate's durable permit path against the SQLite baseline.

Each round runs, one after the other so that all see the same machine load:
  - hack/durable-baseline.py (SQLite WAL, synchronous=FULL, one commit per permit);
  - internal/authority/boltstore BenchmarkIssueConsumeAndPend: the same transaction in actgate's
    store (a signed authority verified, created consumed, its DISPATCH_PENDING record with the
    dispatch receipt written, one group commit);
  - internal/sink BenchmarkHandlePermitDurable: a whole machine permit through the gate (sign,
    the commit above while the receipt log makes the dispatch receipt durable, invoke, the
    outcome's commit), for every build given.
at 1 and 64 callers, and prints each round's figures and, per series, the range over the rounds
of p50, p99 and throughput and of their ratios to the SQLite baseline of the same round.

Standard library only. Test binaries are built by the caller (one per build, so that two builds
alternate within every round):

    go test -c -o /tmp/store.test ./internal/authority/boltstore
    go test -c -o /tmp/sink.test ./internal/sink
    python3 hack/durable-rounds.py --rounds 5 --store /tmp/store.test --sink after=/tmp/sink.test \\
        [--sink before=/tmp/sink-before.test] [--store-build before=/tmp/store-before.test]

docs/performance.md "Durable permits against SQLite".
"""

import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

BENCH_LINE = re.compile(r"^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$")


def parse_bench(out):
    """Returns {sub-benchmark name: {unit: value}} of go test -bench output."""
    res = {}
    for line in out.splitlines():
        m = BENCH_LINE.match(line.strip())
        if not m:
            continue
        fields = m.group(3).split()
        vals = {}
        for i in range(0, len(fields) - 1, 2):
            try:
                vals[fields[i + 1]] = float(fields[i])
            except ValueError:
                pass
        res[m.group(1)] = vals
    return res


def run_go(binary, pkgdir, bench, benchtime):
    out = subprocess.run(
        [binary, "-test.run", "^$", "-test.bench", bench, "-test.benchtime", benchtime, "-test.benchmem"],
        cwd=os.path.join(ROOT, pkgdir), capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"durable-rounds: {binary} failed:\n{out.stdout}\n{out.stderr}")
    return parse_bench(out.stdout)


def go_series(parsed, prefix):
    """Maps callers to (p50 ms, p99 ms, ops/s) for the sub-benchmarks of prefix."""
    out = {}
    for name, v in parsed.items():
        m = re.match(re.escape(prefix) + r"/fsync-group-commit/callers=(\d+)$", name)
        if not m:
            continue
        ops = v.get("calls/s") or v.get("ops/s")
        if ops is None and v.get("ns/op"):
            ops = 1e9 / v["ns/op"]
        if "p50-ms" in v:  # boltstore reports milliseconds, internal/sink microseconds
            out[int(m.group(1))] = (v["p50-ms"], v["p99-ms"], ops)
        else:
            out[int(m.group(1))] = (v["p50-µs"] / 1e3, v["p99-µs"] / 1e3, ops)
    return out


def run_python(callers, seconds):
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "durable-baseline.py"), "--callers", ",".join(map(str, callers)),
         "--duration", str(seconds), "--json"], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"durable-rounds: durable-baseline.py failed:\n{out.stderr}")
    res = {}
    for line in out.stdout.splitlines():
        r = json.loads(line)
        res[r["callers"]] = (r["p50_ms"], r["p99_ms"], r["permits_per_s"])
    return res


def named(spec):
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError("want name=path")
    if not os.access(path, os.X_OK):
        raise argparse.ArgumentTypeError(f"{path} is not an executable")
    return name, os.path.abspath(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--callers", default="1,64")
    ap.add_argument("--seconds", type=float, default=3.0, help="the SQLite baseline's seconds per concurrency")
    ap.add_argument("--benchtime", default="3s", help="go test -benchtime of each benchmark")
    ap.add_argument("--store", action="append", type=named, default=[], help="name=boltstore test binary (repeatable)")
    ap.add_argument("--sink", action="append", type=named, default=[], help="name=sink test binary (repeatable)")
    ap.add_argument("--json", help="also write every round's figures to this file")
    args = ap.parse_args()
    if not 1 <= args.rounds <= 100:
        ap.error("--rounds: 1 to 100")
    callers = [int(c) for c in args.callers.split(",")]
    want = "|".join(f"callers={c}$" for c in callers)

    rounds = []
    for i in range(args.rounds):
        rnd = {"sqlite": run_python(callers, args.seconds)}
        # Alternate the order of the builds from round to round, so neither always runs first.
        stores = args.store if i % 2 == 0 else list(reversed(args.store))
        sinks = args.sink if i % 2 == 0 else list(reversed(args.sink))
        for name, path in stores:
            rnd["store " + name] = go_series(run_go(path, "internal/authority/boltstore",
                                                    f"BenchmarkIssueConsumeAndPend/fsync-group-commit/({want})", args.benchtime),
                                             "BenchmarkIssueConsumeAndPend")
        for name, path in sinks:
            rnd["sink " + name] = go_series(run_go(path, "internal/sink",
                                                   f"BenchmarkHandlePermitDurable/fsync-group-commit/({want})", args.benchtime),
                                            "BenchmarkHandlePermitDurable")
        rounds.append(rnd)
        print(f"round {i + 1}: " + "; ".join(
            f"{k} " + ", ".join(f"c{c} p50 {v[0]:.2f} p99 {v[1]:.2f} ms {v[2]:.0f}/s" for c, v in sorted(s.items()))
            for k, s in rnd.items()), flush=True)

    print()
    print("series, callers: p50 ms, p99 ms, ops/s (min–max over rounds); ratio to SQLite in the same round (min–max, median)")
    for key in rounds[0]:
        for c in callers:
            vals = [r[key][c] for r in rounds]
            base = [r["sqlite"][c] for r in rounds]
            line = f"{key:>14} c={c:<3} p50 {rng([v[0] for v in vals])}  p99 {rng([v[1] for v in vals])}  ops/s {rng([v[2] for v in vals], 0)}"
            if key != "sqlite":
                line += (f"  | ÷sqlite p50 {rng([v[0] / b[0] for v, b in zip(vals, base)], 2, True)}"
                         f" p99 {rng([v[1] / b[1] for v, b in zip(vals, base)], 2, True)}"
                         f" ops/s {rng([v[2] / b[2] for v, b in zip(vals, base)], 2, True)}")
            print(line)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([{k: {str(c): v for c, v in s.items()} for k, s in r.items()} for r in rounds], f, indent=1)
    return 0


def rng(xs, digits=2, median=False):
    xs = sorted(xs)
    s = f"{xs[0]:.{digits}f}–{xs[-1]:.{digits}f}"
    if median:
        s += f" (med {xs[len(xs) // 2]:.{digits}f})"
    return s


if __name__ == "__main__":
    sys.exit(main())
