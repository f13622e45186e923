"""Bench 4: `kkb dry-run --scenario rerun` on the reference kernel against running the same steps with `python`.

Each repetition runs, side by side:

* ``python -m builder dry-run KERNEL --scenario rerun`` as a separate process (what a person runs:
  CLI start, the no-change build, the sandbox, the notebook with every step, combining, the checks,
  the report), timed from outside;
* the kernel's steps directly: each step's command (``python -m kkb_runtime predict --model …``) as
  its own process, one after the other, with the variables the runtime gives a step
  (``KKB_CODE_DIR``, ``KKB_WEIGHTS_DIR``, ``KKB_COMPETITION_DIR``, ``KKB_KERNEL_CONFIG``,
  ``KKB_STEP_NAME``, ``KKB_STEP_OUT``, ``PYTHONPATH``, ``KAGGLE_IS_COMPETITION_RERUN``), against the
  same built code and weights folders and the same competition folder;
* an empty one-cell notebook in the sandbox: the kernel-start constant.

On two data sets: the public test the kernel names (8 rows: the command exactly as typed), and the
hidden test (300 rows) replicated 10 times with ``sandbox.scale_competition_data`` (what
``--rerun-scale 10`` does), handed to both sides (``--data``) so that inference weighs more than
process starts. The no-change ``kkb build`` that the dry run starts with is timed on its own too.

Each repetition is a pair: a dry run and the direct steps back to back, in alternating order. The target's
ratios are the medians of the pairs' ratios: on a machine whose speed drifts over minutes (the same direct steps
twice in a row: 17 s, then 22 s) the ratio of the two sides' medians, taken minutes apart, moves by more than the
margin being measured (it stays in the detail as ``ratio_of_medians``). kkb's own time is read within each dry
run too: its wall less the seconds its steps took in that run (less their timing probe, a few batches a card
step adds in a dry run of a small test so that the projection has a per-row rate), less kernel start, which
shows what kkb adds without the steps' noise.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Row
from bench.reference import OWNER, REPO, clean_environ, copy_reference, empty_notebook_seconds, ensure_assets
from builder.kkb_runtime.steps import step_command
from builder.kkb_runtime.timing import StepTiming
from builder.project.spec import load_spec
from builder.run.sandbox import scale_competition_data

# name: (test folder inside the kernel, replication); None: the [competition] data the kernel names (no --data)
DATASETS: dict[str, tuple[str | None, int]] = {"public": (None, 1), "public-projected": (None, 1),
                                              "hidden": ("data/competition/hidden", 1),
                                              "hidden-x10": ("data/competition/hidden", 10)}
# What a data set adds to the command: the reference names no [competition] hidden_rows, so the command as typed
# projects nothing and its card steps time no probe; "public-projected" asks for the projection to the hidden test's
# 300 rows, and its probe (3 full batches per card step) is kkb's own time.
EXTRA_ARGS: dict[str, tuple[str, ...]] = {"public-projected": ("--hidden-rows", "300")}


def dry_run_cli(kernel: Path, out: Path, data: Path | None, extra: tuple[str, ...] = ()) -> tuple[float, dict]:
    argv = [sys.executable, "-m", "builder", "dry-run", str(kernel), "--scenario", "rerun", "--out", str(out),
            "--owner", OWNER, *(["--data", str(data)] if data else []), *extra]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=clean_environ(), capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"kkb dry-run failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    scenario = json.loads((out / "dryrun" / "report.json").read_text())["scenarios"][0]
    steps = {str(step["name"]): float(step["seconds"]) for step in scenario["steps"]}
    # The timing probe: full batches a card step adds in a dry run when the test has too few for a per-row rate
    # (kkb_runtime.timing); dry-run work that the direct steps do not do, so it counts as kkb's own time.
    probes = {str(step["name"]): timing.probe_seconds if (timing := StepTiming.from_json(step.get("timing"))) else 0.0
              for step in scenario["steps"]}
    return elapsed, {"notebook_s": scenario["wall_seconds"], "steps_s": steps, "probe_s": probes, "rows": scenario["rows"]}


def direct_steps(build: Path, data: Path, work: Path) -> tuple[float, dict]:
    """The steps of ``build/code/kkb_kernel.json``, run one after the other with plain ``python``."""
    code, weights = build / "code", build / "weights"
    config = code / "kkb_kernel.json"
    steps = json.loads(config.read_text())["steps"]
    work.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    for step in steps:
        name = str(step["name"])
        out = work / f"{name}.csv"
        values = {"out": str(out), "code": str(code), "weights": str(weights), "data": str(data), "python": sys.executable}
        env = clean_environ() | {
            "KKB_CODE_DIR": str(code), "KKB_WEIGHTS_DIR": str(weights), "KKB_COMPETITION_DIR": str(data),
            "KKB_KERNEL_CONFIG": str(config), "KKB_STEP_NAME": name, "KKB_STEP_OUT": str(out),
            "PYTHONPATH": str(code), "PYTHONUNBUFFERED": "1", "KAGGLE_IS_COMPETITION_RERUN": "1"}
        step_started = time.perf_counter()
        done = subprocess.run(step_command(str(step["run"]), values), cwd=work, env=env, capture_output=True, text=True)
        seconds[name] = time.perf_counter() - step_started
        if done.returncode != 0 or not out.is_file():
            raise RuntimeError(f"step {name} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return time.perf_counter() - started, {"steps_s": seconds}


QUICK = {"repeat": 1, "warmup": 0, "datasets": ("public",)}

# Where a dry run's seconds go besides the notebook: each phase's cumulative time in one profiled run (not timed
# with the rest: the profiler slows Python code, not the notebook's kernel).
PHASES = {"cli import": ("builder/cli/__init__.py", "<module>"), "build": ("builder/build.py", "build_kernel"),
          "notebook": ("run/execute.py", "execute_notebook"), "second size (projection fit)": ("rehearse/scenarios.py", "_fit_runs"),
          "html report": ("rehearse/html_report.py", "write_html_report"),
          "card inputs": ("rehearse/card_inputs.py", "card_inputs"), "metric report": ("rehearse/metric_report.py", "metric_report"),
          "skew check": ("run/skew.py", "skew_warnings"), "image env": ("run/image_env.py", "build_image_env"),
          "wheelhouse check": ("rehearse/wheelhouse.py", "dry_run_check")}


def profile_phases(kernel: Path, out: Path, data: Path | None, extra: tuple[str, ...] = ()) -> dict[str, float]:
    """One ``kkb dry-run`` under cProfile: the cumulative seconds of each phase (:data:`PHASES`)."""
    import pstats

    stats_file = out.parent / f"{out.name}.prof"
    argv = [sys.executable, "-m", "cProfile", "-o", str(stats_file), "-m", "builder", "dry-run", str(kernel), "--scenario",
            "rerun", "--out", str(out), "--owner", OWNER, *(["--data", str(data)] if data else []), *extra]
    subprocess.run(argv, cwd=REPO, env=clean_environ(), capture_output=True, text=True, check=True)
    table = pstats.Stats(str(stats_file)).stats  # type: ignore[attr-defined]
    found: dict[str, float] = {}
    for (filename, _, name), (_, _, _, cumulative, _) in table.items():
        for phase, (suffix, function) in PHASES.items():
            if name == function and filename.endswith(suffix):
                found[phase] = round(found.get(phase, 0.0) + cumulative, 3)
    return found


def build_cli(kernel: Path, out: Path) -> float:
    """``kkb build`` over an existing build with nothing changed: the first thing ``kkb dry-run`` does."""
    argv = [sys.executable, "-m", "builder", "build", str(kernel), "--out", str(out), "--owner", OWNER]
    started = time.perf_counter()
    subprocess.run(argv, cwd=REPO, env=clean_environ(), check=True, capture_output=True)
    return time.perf_counter() - started


def data_for(kernel: Path, name: str, root: Path) -> tuple[Path, Path | None]:
    """(the competition folder the steps read, what ``--data`` names or None for the kernel's own)."""
    folder, scale = DATASETS[name]
    if folder is None:
        return kernel / "data" / "competition" / "public", None
    if scale == 1:
        return kernel / folder, kernel / folder
    spec = load_spec(kernel)
    scaled = scale_competition_data(kernel / folder, root / f"data-{name}", scale, id_column=spec.submission.id_column,
                                    sample_submission=spec.competition.sample_submission, test=spec.competition.test)
    return scaled.path, scaled.path


def run(repeat: int = 5, warmup: int = 1, datasets: tuple[str, ...] = ("public", "public-projected", "hidden-x10")) -> list[Row]:
    ensure_assets()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="kkb-bench-dryrun-") as tmp:
        root = Path(tmp)
        kernel = copy_reference(root / "reference")
        for name in datasets:
            out = root / f"build-{name}"
            data, data_arg = data_for(kernel, name, root)
            extra = EXTRA_ARGS.get(name, ())
            samples: dict[str, list[float]] = {"dry_run": [], "direct": [], "empty": [], "notebook": [], "build": [],
                                               "own": []}
            info: dict[str, dict] = {}
            for index in range(warmup + repeat):
                if index == 0 and warmup == 0:  # the direct steps need the built folders
                    dry_run_cli(kernel, out, data_arg, extra)
                # Each repetition is a pair run back to back, in alternating order (dry run first, then the direct
                # steps first): the machine's speed drifts over minutes, and a pair's ratio cancels the drift
                # that the medians of runs minutes apart keep.
                if index % 2 == 0:
                    dry_s, info["dry_run"] = dry_run_cli(kernel, out, data_arg, extra)
                    direct_s, info["direct"] = direct_steps(out, data, root / f"direct-{name}-{index}")
                else:
                    direct_s, info["direct"] = direct_steps(out, data, root / f"direct-{name}-{index}")
                    dry_s, info["dry_run"] = dry_run_cli(kernel, out, data_arg, extra)
                empty_s = empty_notebook_seconds(rerun=True)
                build_s = build_cli(kernel, out) if name == datasets[0] else None
                # kkb's own seconds in that same run: its wall less what its steps took there (their timing probe
                # is kkb's), less kernel start
                own_s = (dry_s - sum(info["dry_run"]["steps_s"].values()) + sum(info["dry_run"]["probe_s"].values())
                         - empty_s)
                if index >= warmup:
                    for key, value in (("dry_run", dry_s), ("direct", direct_s), ("empty", empty_s),
                                       ("notebook", info["dry_run"]["notebook_s"]), ("build", build_s), ("own", own_s)):
                        if value is not None:
                            samples[key].append(value)
            info["profile"] = profile_phases(kernel, out, data_arg, extra)  # the same build folder: a no-change build
            rows += _rows(name, samples, info, repeat)
    return rows


def _rows(name: str, samples: dict[str, list[float]], info: dict[str, dict], repeat: int) -> list[Row]:
    dry, direct, empty, notebook, own = (statistics.median(samples[key])
                                         for key in ("dry_run", "direct", "empty", "notebook", "own"))
    # Each repetition's dry run, direct steps and kernel start were measured back to back: a pair
    pairs = list(zip(samples["dry_run"], samples["direct"], samples["empty"], strict=True))
    pair_ratio = statistics.median(d / s for d, s, _ in pairs)
    pair_overheads = [(d - s - e) / s for d, s, e in pairs]
    pair_overhead = statistics.median(pair_overheads)
    overhead = dry - direct - empty
    label = f"{name}, {info['dry_run']['rows']} rows" + (" projected" if name in EXTRA_ARGS else "")
    detail = {"repeat": repeat, "data": name, "rows": info["dry_run"]["rows"], "samples": samples,
              "empty_notebook_s": empty, "overhead_s": dry - direct, "overhead_minus_kernel_start_s": overhead,
              "ratio_of_medians": dry / direct, "overhead_minus_kernel_start_of_medians": overhead / direct,
              "outside_notebook_s": dry - notebook,
              "dry_run": info["dry_run"], "direct": info["direct"], "profile_s": info.get("profile")}
    # The ratios are the medians of each pair's (a dry run and the direct steps back to back); the medians of the
    # two sides, minutes apart, are in the detail (``ratio_of_medians``) and in the value and baseline columns.
    rows = [
        Row("dry-run overhead", f"rerun ({label}): kkb dry-run", dry, "s", "steps with python", direct, pair_ratio,
            "< 1.15x + kernel start", detail),
        Row("dry-run overhead", f"rerun ({label}): overhead - kernel start", pair_overhead * direct, "s",
            "steps with python", direct, pair_overhead, "< 0.15x",
            {"repeat": repeat, "empty_notebook_s": empty, "pairs": pair_overheads,
             "of_medians": overhead / direct}),
        Row("dry-run overhead", f"rerun ({label}): kkb's own time", own, "s",
            "steps with python", direct, own / direct, "(part of the overhead)",
            {"repeat": repeat, "samples": samples["own"],
             "why": "within one run, so the steps' run-to-run noise cancels; it leaves out any slowdown of the steps"}),
        Row("dry-run overhead", f"rerun ({label}): notebook alone", notebook, "s", "steps with python", direct,
            notebook / direct, "(part of kkb dry-run)",
            {"repeat": repeat, "notebook_minus_steps_minus_kernel_start_s": notebook - direct - empty}),
    ]
    if samples["build"]:
        build = statistics.median(samples["build"])
        rows.append(Row("dry-run overhead", "kkb build, nothing changed (reference)", build, "s", "kkb dry-run", dry,
                        build / dry, "(its own process)", {"repeat": repeat, "samples": samples["build"]}))
    return rows
