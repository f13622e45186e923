"""``kkb wheels``: the wheelhouse built here (``builder.bundle.wheels``) or by a helper kernel on Kaggle.

With ``[install] on_kaggle`` a helper kernel with internet on builds every wheel, source packages such as
apex included, inside Kaggle's own image and keeps them as its output; the inference kernel attaches it
through ``kernel_sources``. The helper is pushed and awaited through the same session as ``kkb push``
(its adapter, retries, progress events and polling), pushed again only when its key changed, and only after
Kaggle's limits were asked as for ``kkb push`` (``preflight.check_before_run``; ``--wait-for-slot``, ``--force``,
``--replace``).
"""

from __future__ import annotations

import hashlib
import json
import pprint
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder import __version__
from builder.build import RUNTIME_SOURCE, BuildSettings, build_kernel
from builder.bundle.wheels import (
    FORMAT,
    HELPER_RECORD,
    WheelhouseOptions,
    WheelsResult,
    build_wheelhouse,
    helper_title,
    kernel_requirements,
    wheelhouse_source,
)
from builder.errors import WheelhouseError
from builder.project.credentials import resolve_owner
from builder.project.ids import dataset_slug, kernel_slug
from builder.project.image_facts import ImageFacts, kernel_image
from builder.project.jsonfile import read_object
from builder.project.layout import HELPER_DIR, KERNEL_METADATA, out_dir_of
from builder.project.spec import CUDA_ARCH, SPEC_FILE, KernelSpec, spec_of
from builder.remote.dataset_sync import sync_dataset
from builder.remote.hints import exception_tail
from builder.remote.kaggle_api import KaggleAdapter
from builder.remote.limits import accelerator_of
from builder.remote.lock import kernel_lock
from builder.remote.preflight import Needed, PlannedRun, check_before_run, push_to_run
from builder.remote.session import ProgressFn, PushSettings, Session, Waits, open_session, private_tmpdir


@dataclass(frozen=True)
class WheelsSettings:
    kernel_dir: Path
    out_dir: Path | None = None              # the build folder (default build/<name>); wheels go in <out_dir>/wheels
    owner: str | None = None
    on_kaggle: bool = False                  # must agree with [install] on_kaggle (the inference kernel reads that)
    force: bool = False                      # resolve and download again even when the key is unchanged
    check: bool = True                       # run the offline install check after a local build
    index_args: tuple[str, ...] = ()         # pip index options for the local build (--index-url, --find-links ...)
    helper_pip_args: tuple[str, ...] = ()    # pip index options the helper kernel uses (a private index)
    base_url: str | None = None              # --on-kaggle: Kaggle API (default $KKB_KAGGLE_API, else kaggle.com)
    wait: bool = True                        # --on-kaggle: wait for the helper's run to finish
    run_timeout_s: float = 3 * 3600.0
    waits: Waits | None = None               # --on-kaggle: polling (default: push's)
    adapter: KaggleAdapter | None = None     # --on-kaggle: the seam (tests hand one in)
    progress: ProgressFn | None = None
    spec: KernelSpec | None = None  # the command's loaded kernel.toml (read once per command); None: load kernel_dir's
    # --on-kaggle: Kaggle's limits before the helper kernel is pushed (builder.remote.preflight), as for kkb push;
    # ``force`` (above) pushes past them too.
    wait_for_slot: bool = False              # wait for a GPU session slot, or for the helper's running version
    replace: bool = False                    # stop the helper's running version first (deleting the helper kernel)


def build_wheels(settings: WheelsSettings) -> WheelsResult:
    """``kkb wheels``: build (or reuse) the kernel's wheelhouse here, or have Kaggle build it."""
    kernel_dir = Path(settings.kernel_dir)
    spec = spec_of(settings.spec, kernel_dir)
    if settings.on_kaggle and not spec.install.on_kaggle:
        raise WheelhouseError(
            f"{kernel_dir / SPEC_FILE}: --on-kaggle, but [install] on_kaggle is not set",
            hint="set [install] on_kaggle = true: the inference kernel must know to attach the helper kernel's "
                 "output instead of a wheelhouse dataset",
        )
    owner = resolve_owner(settings.owner, spec.kernel.owner, kernel_dir / SPEC_FILE)
    out_dir = out_dir_of(kernel_dir, settings.out_dir)
    source = wheelhouse_source(spec, owner)
    if source is None:
        notes = ("source packages compile in the kernel from the code dataset",) if spec.install.source_packages else ()
        return WheelsResult(kernel_dir.resolve().name, "none", None, "nothing", None, None, notes=notes)
    if source.kind == "kernel":
        return _build_on_kaggle(settings, spec, kernel_dir, owner, out_dir)
    options = WheelhouseOptions(force=settings.force, check=settings.check, index_args=settings.index_args)
    return build_wheelhouse(spec, kernel_dir, out_dir, source.ref, options, kernel_image(spec, owner, settings.base_url))



# Building on Kaggle: the helper kernel
# --------------------------------------------------------------------------------------------

# stdlib only; embedded in the helper. Closed under their relative imports (a test checks it): the
# typed kernel config reads through card, typed and vocabulary.
RUNTIME_MODULES = ("vocabulary", "typed", "card", "config", "inputs", "install", "preload", "wheelhouse")
HELPER_GPU_NEEDS_S = 3600.0  # the quota a helper compiling CUDA extensions (apex) on a T4 is allowed


@dataclass(frozen=True)
class HelperKernel:
    kernel_id: str
    title: str
    code_file: str
    metadata: dict[str, Any]
    script: str
    key: str
    code_dataset: str | None  # attached when source packages need compiling


def helper_kernel(spec: KernelSpec, kernel_dir: Path, owner: str, image: ImageFacts, *, code_hash: str | None = None,
                  pip_args: Sequence[str] = ()) -> HelperKernel:
    """The helper kernel's metadata and script (internet on, a script kernel, output kept)."""
    title = helper_title(spec)
    kernel_id = f"{owner}/{kernel_slug(title)}"
    if spec.install.wheelhouse and spec.install.wheelhouse.partition("/")[0] != owner:
        raise WheelhouseError(f"[install] wheelhouse '{spec.install.wheelhouse}' belongs to another owner than {owner}",
                              hint="a helper kernel is pushed under your own account: use your username as owner")
    sources = [package.model_dump() for package in spec.install.source_packages]
    code_dataset = (spec.code.dataset or f"{owner}/{dataset_slug(spec.kernel.kernel_slug, 'code')}") if sources else None
    shape = spec.kernel.machine_shape
    config: dict[str, Any] = {
        "id": kernel_id, "requirements": kernel_requirements(spec, kernel_dir), "exclude": list(spec.install.exclude),
        "sources": sources, "code_dataset": code_dataset, "cuda_arch_list": CUDA_ARCH.get(shape or ""),
        "pip_args": list(pip_args),
    }
    gpu = spec.kernel.uses_gpu and any(package.cuda_ext for package in spec.install.source_packages)
    metadata: dict[str, Any] = {
        "id": kernel_id, "title": title, "code_file": f"{kernel_slug(title)}.py", "language": "python",
        "kernel_type": "script", "is_private": True, "enable_gpu": gpu, "enable_tpu": False,
        # Internet on: it downloads. Never a competition kernel: it is attached, not submitted.
        "enable_internet": True, "dataset_sources": [code_dataset] if code_dataset else [],
        "competition_sources": [], "kernel_sources": [], "model_sources": [],
    }
    if gpu:  # nvcc and TORCH_CUDA_ARCH_LIST for the inference kernel's GPU
        metadata["machine_shape"] = shape
    # The same image as the inference kernel, or the wheels may not fit it.
    if spec.kernel.docker_image_pinning:
        metadata["docker_image_pinning_type"] = spec.kernel.docker_image_pinning
    if spec.kernel.docker_image:
        metadata["docker_image"] = spec.kernel.docker_image
    # The image it builds for: a new Python rebuilds everything, a new torch or CUDA what compiles against them.
    compiled = any(package.cpp_ext or package.cuda_ext for package in spec.install.source_packages)
    built_for = {"python": image.python, **({"cuda": image.cuda, "torch": image.torch} if compiled else {})}
    key_payload = {"format": FORMAT, "config": config, "metadata": metadata, "code_hash": code_hash, "kkb": __version__,
                   "image": built_for}
    key = "sha256:" + hashlib.sha256(json.dumps(key_payload, sort_keys=True).encode()).hexdigest()
    config["key"] = key
    return HelperKernel(kernel_id, title, metadata["code_file"], metadata, render_helper_script(config), key, code_dataset)


def render_helper_script(config: Mapping[str, Any]) -> str:
    runtime = RUNTIME_SOURCE
    modules = {name: (runtime / f"{name}.py").read_text(encoding="utf-8") for name in RUNTIME_MODULES}
    return (
        f"# kkb wheels helper for {config['id']}: with internet on and in Kaggle's own image, download and build\n"
        "# every wheel the inference kernel installs offline (source packages such as apex included) and keep\n"
        "# them as this notebook's output in /kaggle/working/wheels. Generated by kkb "
        f"{__version__}: run `kkb wheels --on-kaggle` again instead of editing it.\n"
        "import sys\nimport tempfile\nfrom pathlib import Path\n\n"
        f"CONFIG = {pprint.pformat(dict(config), width=110, sort_dicts=True)}\n\n"
        "# kkb's kernel-side runtime (standard library only), as files this script unpacks and imports.\n"
        f"RUNTIME = {modules!r}\n\n\n"
        "def _runtime():\n"
        '    package = Path(tempfile.mkdtemp(prefix="kkb-")) / "kkb_runtime"\n'
        "    package.mkdir()\n"
        '    (package / "__init__.py").write_text("")\n'
        "    for name, text in RUNTIME.items():\n"
        '        (package / f"{name}.py").write_text(text)\n'
        "    sys.path.insert(0, str(package.parent))\n"
        "    from kkb_runtime import wheelhouse\n\n"
        "    return wheelhouse\n\n\n"
        "_runtime().build_in_image(CONFIG)\n"
    )


def write_helper_kernel(helper: HelperKernel, folder: Path) -> Path:
    """``kernel-metadata.json`` and the script into ``folder``, keeping its record of the last push."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.py"):
        stale.unlink()
    (folder / helper.code_file).write_text(helper.script, encoding="utf-8")
    (folder / KERNEL_METADATA).write_text(json.dumps(helper.metadata, indent=1) + "\n")
    return folder / helper.code_file


def _build_on_kaggle(settings: WheelsSettings, spec: KernelSpec, kernel_dir: Path, owner: str, out_dir: Path) -> WheelsResult:
    # It pushes the code dataset and a kernel, as kkb push does: never two of them at once on one project.
    with kernel_lock(kernel_dir, "wheels --on-kaggle"):
        return _push_helper(settings, spec, kernel_dir, owner, out_dir)


def _push_helper(settings: WheelsSettings, spec: KernelSpec, kernel_dir: Path, owner: str, out_dir: Path) -> WheelsResult:
    build = build_kernel(BuildSettings(kernel_dir=kernel_dir, out_dir=out_dir, owner=owner, spec=spec)) \
        if spec.install.source_packages else None
    image = kernel_image(spec, owner, settings.base_url)
    helper = helper_kernel(spec, kernel_dir, owner, image, code_hash=build.code_hash if build else None,
                           pip_args=settings.helper_pip_args)
    folder = out_dir / HELPER_DIR
    write_helper_kernel(helper, folder)
    record = read_object(folder / HELPER_RECORD)
    # push's session: the same adapter, retries, progress events and polling as kkb push.
    ctx = open_session(PushSettings(kernel_dir=kernel_dir, out_dir=out_dir, owner=owner, base_url=settings.base_url,
                                    progress=settings.progress, adapter=settings.adapter, waits=settings.waits or Waits(),
                                    spec=spec, wait_for_slot=settings.wait_for_slot, force=settings.force,
                                    replace=settings.replace))
    name = kernel_dir.resolve().name
    current = ctx.adapter.kernel_version(helper.kernel_id)
    if not settings.force and record.get("key") == helper.key and current is not None and record.get("version") == current:
        status = _settle_helper(ctx, settings, folder, record, helper.kernel_id, current)
        if status is not None:  # this key's run finished (or is still running and we do not wait): no new push
            action = "unchanged" if status == "complete" else "pending"
            return WheelsResult(name, "kernel", helper.kernel_id, action, helper.key, folder, kernel_version=current)
    check_before_run(ctx, _planned_run(helper, settings), current=current)  # a new version runs: before any upload
    if build is not None:
        with private_tmpdir(kernel_dir, ctx.adapter.endpoint):
            sync_dataset(ctx, "code", Path(build.code_dir), build.code_dataset, build.code_hash,
                          f"kkb wheels {helper.kernel_id}")
    ctx.emit("wheels", f"pushing the helper kernel {helper.kernel_id}")
    version, pushed = push_to_run(ctx, folder, helper.kernel_id)
    record = {"key": helper.key, "kernel": helper.kernel_id, "version": version, "built_for": image.to_json()}
    _write_json(folder / HELPER_RECORD, {**record, "status": "pushed"})
    status = _await_helper(ctx, helper.kernel_id, version, settings.run_timeout_s) if settings.wait else "pushed"
    _write_json(folder / HELPER_RECORD, {**record, "status": status})
    return WheelsResult(name, "kernel", helper.kernel_id, "pushed", helper.key, folder, kernel_version=version,
                        kernel_url=pushed.url or None)


def _planned_run(helper: HelperKernel, settings: WheelsSettings) -> PlannedRun:
    """The helper's run for Kaggle's limits: on a GPU only to compile CUDA extensions (an hour allowed, within the
    time kkb waits for it), else on a CPU, which bills no quota."""
    shape = helper.metadata.get("machine_shape") if helper.metadata.get("enable_gpu") else None
    needed = Needed(min(HELPER_GPU_NEEDS_S, settings.run_timeout_s), "compiling CUDA extensions: an hour allowed")
    return PlannedRun(helper.kernel_id, shape, accelerator_of(shape, bool(shape), False), needed,
                      chosen_by="[kernel] accelerator in kernel.toml: CUDA extensions compile on its GPU")


def _settle_helper(ctx: Session, settings: WheelsSettings, folder: Path, record: Mapping[str, Any], kernel_id: str,
                   version: int) -> str | None:
    """The state of the version already pushed for this key; None when it failed and must be pushed again."""
    if record.get("status") == "complete":
        return "complete"
    state = ctx.adapter.kernel_status(kernel_id, version).status
    if state not in ("complete", "queued", "running"):
        return None
    if state != "complete" and settings.wait:
        state = _await_helper(ctx, kernel_id, version, settings.run_timeout_s)
    _write_json(folder / HELPER_RECORD, {**record, "status": state if state == "complete" else "pushed"})
    return state


def _await_helper(ctx: Session, kernel_id: str, version: int | None, timeout_s: float) -> str:
    def probe() -> tuple[str, bool]:
        state = ctx.adapter.kernel_status(kernel_id, version).status
        return state, state in ("complete", "error", "cancel_acknowledged", "cancel_requested")

    state = ctx.wait("wheels", f"helper kernel {kernel_id} v{version}", probe, timeout_s,
                     hint="the helper is still building; run kkb wheels --on-kaggle again later (it does not push twice)")
    if state != "complete":
        status = ctx.adapter.kernel_status(kernel_id, version)
        tail = exception_tail(ctx.adapter.kernel_log(kernel_id, version))
        raise WheelhouseError(f"the helper kernel {kernel_id} v{version} ended {state}: {status.failure_message}\n{tail}",
                              hint=f"read its log (kaggle kernels output {kernel_id}); fix the requirement it names")
    return state


def _write_json(path: Path, value: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(dict(value), indent=1, sort_keys=True) + "\n")


