"""`make bench`: every benchmark, side by side in one run; a table of ratios and bench/results/bench.json."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from pathlib import Path

from bench.common import RESULTS, Row, render_table, write_json

BENCHMARKS = ("push", "bundle", "fast_commit", "dryrun", "inference", "sandbox", "projection", "text_inference", "install")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("names", nargs="*", default=list(BENCHMARKS), help=f"which benchmarks ({', '.join(BENCHMARKS)})")
    parser.add_argument("--quick", action="store_true", help="small sizes and fewer repetitions (a smoke run)")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON file to write (default: bench/results/bench.json, bench-quick.json with --quick)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)} (choose from {', '.join(BENCHMARKS)})")
    rows: list[Row] = []
    failed = []
    for name in args.names:
        module = importlib.import_module(f"bench.{name}")
        print(f"running {name} ...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        try:
            rows += module.run(**(module.QUICK if args.quick and hasattr(module, "QUICK") else {}))
            print(f"{name}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        except Exception as exc:
            traceback.print_exc()
            failed.append(name)
            rows.append(Row(name, f"FAILED: {type(exc).__name__}", None, "", target=(str(exc).splitlines() or [""])[0][:80]))
    print(render_table(rows))
    out = args.out or RESULTS / ("bench-quick.json" if args.quick else "bench.json")
    print(f"\nwritten: {write_json(rows, out)}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
