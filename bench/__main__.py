"""`make bench`: every benchmark, side by side in one run; a table of ratios and bench/results/bench.json."""

from __future__ import annotations

import argparse
import importlib
import sys

from bench.common import render_table, write_json

BENCHMARKS = ("push", "bundle", "fast_commit", "dryrun", "inference")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("names", nargs="*", default=list(BENCHMARKS), help=f"which benchmarks ({', '.join(BENCHMARKS)})")
    parser.add_argument("--quick", action="store_true", help="small sizes and fewer repetitions (a smoke run)")
    args = parser.parse_args(argv)
    rows = []
    for name in args.names:
        module = importlib.import_module(f"bench.{name}")
        print(f"running {name} ...", file=sys.stderr, flush=True)
        rows += module.run(**(module.QUICK if args.quick and hasattr(module, "QUICK") else {}))
    print(render_table(rows))
    print(f"\nwritten: {write_json(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
