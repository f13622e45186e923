"""``kkb image --on-kaggle``: Kaggle's image described by Kaggle itself, stored where kkb reads it.

kkb ships a description of Kaggle's image (which Python, which packages at which versions) assembled
from public sources and marked unverified. This command replaces guesswork with a capture: a tiny
private *script* kernel, internet off, on the accelerator asked for (default the T4 x2 a GPU kernel
gets), records the Python version, every installed distribution and its version
(``importlib.metadata``), the modules whose distribution has another name, and, when torch is there,
the CUDA and cuDNN versions and the GPU's name and memory. kkb downloads that file, adds the date of
the run and ``verified: true``, checks its shape and stores it with ``builder.project.image_store``,
where the dry run and ``kkb wheels`` look before the shipped description.

The capture kernel is ``<owner>/kkb-image-capture``, one per account, versioned at each capture; its
folder and history live in ``$XDG_CONFIG_HOME/kkb/image-kernel`` (not in any kernel project). It is pushed after
Kaggle's limits were asked as for ``kkb push`` (``preflight.check_before_run``: a capture still running, the
quota, the GPU session cap; ``--wait-for-slot``, ``--force``, ``--replace``).
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.errors import KernelFailed, KkbError
from builder.kkb_runtime import image_capture
from builder.kkb_runtime.timing import reference_forward_seconds
from builder.project.credentials import kaggle_username
from builder.project.ids import kernel_slug
from builder.project.image_store import FORMAT, config_dir, store_image
from builder.project.jsonfile import read_object
from builder.project.layout import KERNEL_METADATA
from builder.project.spec import DEFAULT_GPU_SHAPE, MACHINE_SHAPES
from builder.remote.hints import exception_tail
from builder.remote.kaggle_api import KaggleAdapter
from builder.remote.limits import accelerator_of
from builder.remote.preflight import Needed, PlannedRun, check_before_run, push_to_run
from builder.remote.session import ProgressFn, PushSettings, Session, Waits, open_session

TITLE = "kkb image capture"
OUTPUT = "kaggle-image.json"
WORK_DIR = "image-kernel"
RUN_TIMEOUT_S = 3600.0
# What a capture needs of the accelerator quota: it imports torch, lists the installed distributions and times one
# small forward pass on the GPU and the CPU, a few minutes with the session's start; a quarter of an hour allowed.
CAPTURE_NEEDS = Needed(900.0, "a capture runs for minutes: a quarter of an hour allowed")

# Runs inside Kaggle's image: standard library only, torch only if the image has it. The base is what every kkb
# kernel records of its own run (kkb_runtime.image_capture); this kernel adds what needs torch imported.
CAPTURE_SCRIPT = inspect.getsource(image_capture) + '''

# kkb image --on-kaggle: describe this image (Python, packages, CUDA, cuDNN, GPU) as JSON.
image = describe()
image["captured"] = image["captured"][:10]
import_names = {}
for module, dists in sorted(metadata.packages_distributions().items()):
    dist = canonical(dists[0])
    if not module.startswith("_") and canonical(module) != dist and dist in image["packages"]:
        import_names[module] = dist
image["import_names"] = import_names
image["cudnn"] = None
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    image["cuda"] = torch.version.cuda
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    image["cudnn"] = str(cudnn) if cudnn else None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        image["gpu"] = {"name": props.name, "memory_bytes": int(props.total_memory), "count": torch.cuda.device_count()}
out = Path(os.environ.get("KKB_KAGGLE_ROOT", "/kaggle")) / "working" / "kaggle-image.json"
out.write_text(json.dumps(image, indent=1, sort_keys=True))
print(f"python {image['python_full']}, {len(image['packages'])} packages, cuda {image['cuda']}, gpu {image['gpu']}")
'''
# The reference forward pass (kkb_runtime.timing), timed on Kaggle's GPU and CPU: the dry run times it on the
# local CPU too, and the ratio is the device factor it projects GPU time with (builder.rehearse.device_factor).
BENCHMARK = inspect.getsource(reference_forward_seconds) + '''

if torch is not None and torch.cuda.is_available():
    try:
        image["benchmark"] = {"workload": "reference_forward_seconds", "gpu": image["gpu"]["name"],
                              "gpu_seconds": reference_forward_seconds("cuda"), "cpu_seconds": reference_forward_seconds("cpu"),
                              "cpus": os.cpu_count(), "captured": image["captured"]}
    except Exception as exc:  # a capture without the timing is still a capture
        image["benchmark"] = {"error": repr(exc)}
'''
CAPTURE_SCRIPT = CAPTURE_SCRIPT.replace('out = Path(os.environ', BENCHMARK + 'out = Path(os.environ', 1)
# The kernel's environment, which the dry run gives its kernels (builder.project.kaggle_env): each variable with its
# value, a secret's by its name only (its value never leaves Kaggle: the dry run gives it an inert stand-in).
ENVIRONMENT = '''
_secret = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|_KEY$", re.IGNORECASE)
image["environment"] = {"sources": [f"captured by kkb image --on-kaggle on {image['captured']}"], "variables": [
    {"name": name, **({"stand_in": True} if _secret.search(name) else {"value": value}), "source": "captured on Kaggle"}
    for name, value in sorted(os.environ.items()) if not name.startswith(("KKB_", "JPY_"))]}
'''
CAPTURE_SCRIPT = CAPTURE_SCRIPT.replace('out = Path(os.environ', ENVIRONMENT + 'out = Path(os.environ', 1)


@dataclass(frozen=True)
class ImageSettings:
    owner: str | None = None
    accelerator: str = "gpu"       # gpu (T4 x2), none, or a machine shape
    base_url: str | None = None
    waits: Waits = field(default_factory=Waits)
    progress: ProgressFn | None = None
    adapter: KaggleAdapter | None = None
    # Kaggle's limits before the capture kernel is pushed (builder.remote.preflight), as for kkb push.
    wait_for_slot: bool = False  # wait for a GPU session slot, or for a capture still running
    force: bool = False  # push anyway (it bills; Kaggle may refuse or queue it)
    replace: bool = False  # stop a capture still running first (Kaggle's API: deleting the capture kernel)


@dataclass(frozen=True)
class ImageResult:
    path: Path                     # where the description is stored
    kernel_id: str
    kernel_version: int | None
    machine_shape: str
    description: dict[str, Any]

    @property
    def summary(self) -> str:
        d = self.description
        gpu = d.get("gpu") or {}
        where = f"{gpu.get('name')} ({int(gpu.get('memory_bytes') or 0) / 2**30:.1f} GiB)" if gpu else "no GPU"
        return (f"Python {d['python']}, {len(d['packages'])} packages, CUDA {d.get('cuda') or '-'}, "
                f"cuDNN {d.get('cudnn') or '-'}, {where}, captured {d['captured']}")


def capture_image(settings: ImageSettings) -> ImageResult:
    """Push the capture kernel, wait for it, download its description and store it."""
    shape = _shape(settings.accelerator)
    folder = config_dir() / WORK_DIR
    ctx = open_session(PushSettings(kernel_dir=folder, owner=settings.owner, base_url=settings.base_url,
                                    waits=settings.waits, progress=settings.progress, adapter=settings.adapter,
                                    wait_for_slot=settings.wait_for_slot, force=settings.force, replace=settings.replace))
    owner = settings.owner or kaggle_username() or ctx.adapter.username
    kernel_id = f"{owner}/{kernel_slug(TITLE)}"
    _write_kernel(folder, kernel_id, shape)
    run = PlannedRun(kernel_id, shape, accelerator_of(shape, False, False), CAPTURE_NEEDS, chosen_by="--accelerator")
    check_before_run(ctx, run, current=ctx.adapter.kernel_version(kernel_id))
    ctx.emit("image", f"pushing {kernel_id} (private script, internet off, machine {shape or 'CPU'})")
    version, _ = push_to_run(ctx, folder, kernel_id)
    status = _await(ctx, kernel_id, version, settings.waits)
    output = folder / "output"
    files = ctx.adapter.kernel_output(kernel_id, version, output)
    captured = read_object(output / OUTPUT)
    if status != "complete" or not captured:
        tail = exception_tail(ctx.adapter.kernel_log(kernel_id, version)) or "(the log is empty)"
        raise KernelFailed(f"the image capture {kernel_id} v{version} ended {status} without {OUTPUT} "
                           f"(output: {', '.join(p.name for p in files) or 'nothing'})\n--- end of the kernel log ---\n{tail}",
                           hint="run kkb image --on-kaggle again; with --accelerator none if the GPU shape is refused")
    description = _description(captured, kernel_id, version, shape)
    path = store_image(description, f"{kernel_id} v{version}: {OUTPUT}")
    return ImageResult(path, kernel_id, version, shape or "CPU", description)


def _shape(accelerator: str) -> str | None:
    if accelerator == "gpu":
        return DEFAULT_GPU_SHAPE
    if accelerator == "none":
        return None
    if accelerator not in MACHINE_SHAPES:
        raise KkbError(f"--accelerator: unknown accelerator '{accelerator}'",
                       hint=f"use gpu, none or one of: {', '.join(MACHINE_SHAPES)}")
    return accelerator


def _write_kernel(folder: Path, kernel_id: str, shape: str | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    code_file = f"{kernel_id.split('/')[1]}.py"
    (folder / code_file).write_text(CAPTURE_SCRIPT, encoding="utf-8")
    metadata: dict[str, Any] = {
        "id": kernel_id, "title": TITLE, "code_file": code_file, "language": "python", "kernel_type": "script",
        "is_private": True, "enable_gpu": bool(shape and shape.startswith("Nvidia")),
        "enable_tpu": bool(shape and shape.startswith("Tpu")), "enable_internet": False,
        "dataset_sources": [], "competition_sources": [], "kernel_sources": [], "model_sources": [],
    }
    if shape:
        metadata["machine_shape"] = shape
    (folder / KERNEL_METADATA).write_text(json.dumps(metadata, indent=1) + "\n")


def _await(ctx: Session, kernel_id: str, version: int | None, waits: Waits) -> str:
    def probe() -> tuple[str, bool]:
        state = ctx.adapter.kernel_status(kernel_id, version).status
        return state, state in ("complete", "error", "cancel_acknowledged", "cancel_requested")

    return ctx.wait("image", f"image capture {kernel_id} v{version}", probe, waits.run_timeout_s or RUN_TIMEOUT_S,
                    hint=f"Kaggle is still running it: run kkb image --on-kaggle again later, or kaggle kernels output {kernel_id}")


def _description(captured: dict[str, Any], kernel_id: str, version: int | None, shape: str | None) -> dict[str, Any]:
    """The captured facts in the shipped description's format (``format: 1``)."""
    gpu = captured.get("gpu") if isinstance(captured.get("gpu"), dict) else None
    return {
        "format": FORMAT,
        "name": f"Kaggle image as captured by {kernel_id} v{version} ({shape or 'CPU'})",
        "captured": str(captured.get("captured") or ""),
        "python": str(captured.get("python") or ""),
        "cuda": captured.get("cuda"), "cudnn": captured.get("cudnn"),
        "gpu": {"name": str(gpu.get("name")), "memory_bytes": int(gpu.get("memory_bytes") or 0)} if gpu else None,
        "sources": [f"kkb image --on-kaggle: {kernel_id} v{version} on {shape or 'CPU'}, Python "
                    f"{captured.get('python_full')}, {captured.get('platform')}"
                    + (f", image {captured['docker_image']}" if captured.get("docker_image") else "")],
        "verified": True,
        "packages": {str(k): str(v) for k, v in dict(captured.get("packages") or {}).items()},
        "preinstalled_patterns": [],
        "import_names": {str(k): str(v) for k, v in dict(captured.get("import_names") or {}).items()},
        **({"benchmark": dict(captured["benchmark"])} if isinstance(captured.get("benchmark"), dict) else {}),
        **({"environment": dict(captured["environment"])} if isinstance(captured.get("environment"), dict) else {}),
    }


__all__ = ["ImageResult", "ImageSettings", "capture_image"]
