"""Rebuild ``kaggle-image.json`` from the package freeze Kaggle publishes for its Python image.

Kaggle/docker-python keeps ``installed_cpu_packages.txt`` (``pip freeze`` of the CPU image, branch
``list_packages``) next to ``Dockerfile.tmpl`` (the Colab base and the image's Python). No freeze of the
GPU image is published: it is the same requirements on Colab's GPU runtime, so its description is the
CPU freeze with the torch family's ``+cpu`` build label dropped (the CUDA label of the GPU build is not
published) and the NVIDIA libraries named by pattern. Run from the repository root::

    python builder/data/refresh_image.py --repo PATH/TO/docker-python [--ref list_packages]
    python builder/data/refresh_image.py --url https://raw.githubusercontent.com/Kaggle/docker-python/list_packages

It keeps the import names of the current file (module -> distribution, where they differ), adds those
of the packages installed here, writes the sources with the commit and its date, and prints a summary
of what changed. The kernel's environment (``environment``: what the dry run gives a kernel instead of this
machine's variables, :mod:`builder.project.kaggle_env`) is the ``ENV`` lines of ``Dockerfile.tmpl`` (the GPU
image's own under its ``{{ if eq .Accelerator "gpu" }}`` blocks) and the runtime's ``KAGGLE_*`` variables
(:data:`RUNTIME_VARIABLES`, read by docker-python's ``patches/``), per-session secrets as inert stand-ins.
Standard library only, so it runs anywhere.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import urllib.request
from datetime import date
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = HERE / "kaggle-image.json"
FREEZE = "installed_cpu_packages.txt"
DOCKERFILE = "Dockerfile.tmpl"
DEFAULT_REF = "list_packages"
_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")
_PYTHON = re.compile(r"python(3\.\d+)/(?:dist|site)-packages")
_BASE = re.compile(r"^FROM (\S+/runtime:\S+)", re.MULTILINE)
_ASSIGNMENT = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)')
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
# The base image's value of a variable the Dockerfile extends ($PYTHONPATH): Colab's runtime image publishes no ENV,
# so it is taken as empty, and the list separator next to it goes with it.
_UNKNOWN = "\x00"
# Set by Kaggle's runtime for each kernel session, not by the image (names from docker-python's patches/ and
# Kaggle's docs); a per-session or secret value is an inert stand-in (the dry run is offline: nothing can use it).
RUNTIME_VARIABLES: tuple[dict[str, object], ...] = (
    {"name": "KAGGLE_KERNEL_RUN_TYPE", "value": "Batch",
     "source": "Kaggle's runtime: Batch for a committed run (Save & Run All, kernels push) and its scoring rerun; "
               "patches/kaggle_module_resolver.py tells Kaggle by it"},
    {"name": "KAGGLE_URL_BASE", "value": "https://www.kaggle.com",
     "source": "Kaggle's runtime; patches/kaggle_web_client.py (its default, _KAGGLE_DEFAULT_URL_BASE)"},
    {"name": "KAGGLE_USER_SECRETS_TOKEN", "stand_in": True,
     "source": "Kaggle's runtime, per session (a JWT): patches/kaggle_web_client.py, sitecustomize.py"},
    {"name": "KAGGLE_DATA_PROXY_TOKEN", "stand_in": True,
     "source": "Kaggle's runtime, per session: patches/kaggle_gcp.py, sitecustomize.py"},
    {"name": "KAGGLE_DATA_PROXY_URL", "value": "http://127.0.0.1:9", "stand_in": True,
     "source": "Kaggle's runtime: patches/kaggle_gcp.py, sitecustomize.py (the BigQuery and GenAI proxy; a closed "
               "loopback port here)"},
    {"name": "KAGGLE_GRPC_DATA_PROXY_URL", "value": "127.0.0.1:9", "stand_in": True,
     "source": "Kaggle's runtime: patches/sitecustomize.py (a closed loopback port here)"},
    {"name": "KAGGLE_DATA_PROXY_PROJECT", "stand_in": True, "source": "Kaggle's runtime: patches/kaggle_gcp.py"},
    {"name": "KAGGLE_KERNEL_INTEGRATIONS", "value": "",
     "source": "Kaggle's runtime: patches/kaggle_gcp.py (none: an offline competition kernel attaches no GCP service)"},
    {"name": "KAGGLE_DOCKER_IMAGE", "value": "gcr.io/kaggle-images/python", "accelerator": "cpu",
     "source": "Kaggle's runtime: the image the session runs (docker-python's push: gcr.io/kaggle-images/python); "
               "kkb image --on-kaggle captures its tag"},
    {"name": "KAGGLE_DOCKER_IMAGE", "value": "gcr.io/kaggle-gpu-images/python", "accelerator": "gpu",
     "source": "Kaggle's runtime: the image the session runs (the GPU image); kkb image --on-kaggle captures its tag"},
    {"name": "KAGGLE_CONTAINER_NAME", "value": "kaggle_kkb-stand-in", "stand_in": True,
     "source": "Kaggle's runtime, per session (kaggle_<session>); code tells Kaggle by its presence"},
    {"name": "KAGGLE_GCP_ZONE", "stand_in": True, "source": "Kaggle's runtime, per session: the session's zone"},
)
# The torch family is built per accelerator: the CPU image's local label (+cpu) is not the GPU image's.
PER_ACCELERATOR = ("torch", "torchvision", "torchaudio")
# What only the GPU image has, by pattern (versions follow its torch build).
GPU_ONLY = ("nvidia-*", "triton")
# Well-known modules whose distribution has another name (kept even when not installed here).
KNOWN_IMPORT_NAMES = {
    "sklearn": "scikit-learn", "skimage": "scikit-image", "cv2": "opencv-python", "PIL": "pillow", "yaml": "pyyaml",
    "dateutil": "python-dateutil", "google.protobuf": "protobuf", "bs4": "beautifulsoup4", "attr": "attrs",
    "huggingface_hub": "huggingface-hub", "sentence_transformers": "sentence-transformers",
    "typing_extensions": "typing-extensions", "pydantic_core": "pydantic-core", "Crypto": "pycryptodome",
    "OpenSSL": "pyopenssl", "jwt": "pyjwt", "lightning": "lightning", "pytorch_lightning": "pytorch-lightning",
    "tensorflow_hub": "tensorflow-hub", "tf_keras": "tf-keras", "umap": "umap-learn", "Levenshtein": "levenshtein",
    "sentencepiece": "sentencepiece", "fitz": "pymupdf", "magic": "python-magic", "docx": "python-docx",
}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_freeze(text: str) -> dict[str, str]:
    """``pip freeze`` lines -> {canonical name: version}; editable, URL and comment lines are skipped."""
    packages: dict[str, str] = {}
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if match:
            packages[canonical(match.group(1))] = match.group(2)
    return packages


def gpu_packages(cpu: dict[str, str]) -> dict[str, str]:
    """The GPU image's description from the CPU freeze (see the module docstring)."""
    return {name: version.split("+")[0] if name in PER_ACCELERATOR else version for name, version in cpu.items()}


def import_names(packages: dict[str, str], current: dict[str, str]) -> dict[str, str]:
    """module -> distribution where they differ: the current file's, the known ones, and what is installed here."""
    names = {**current, **KNOWN_IMPORT_NAMES}
    for module, dists in metadata.packages_distributions().items():
        for dist in dists:
            key = canonical(dist)
            if key in packages and canonical(module) != key and not module.startswith("_"):
                names.setdefault(module, key)
    return {module: dist for module, dist in sorted(names.items()) if dist in packages}


def dockerfile_environment(dockerfile: str, where: str) -> list[dict[str, object]]:
    """The ``ENV`` variables of ``Dockerfile.tmpl``: ``ARG`` defaults and earlier values expanded, the GPU image's own
    (inside ``{{ if eq .Accelerator "gpu" }}``) marked ``"accelerator": "gpu"`` (``{{ else }}``: ``"cpu"``)."""
    values: dict[str, str] = {}
    found: dict[tuple[str, str | None], dict[str, object]] = {}
    for accelerator, keyword, text in _instructions(dockerfile):
        for name, raw in _ASSIGNMENT.findall(text):
            value = _expand(raw.strip('"'), values)
            values[name] = value
            if keyword == "ENV":
                entry: dict[str, object] = {"name": name, "value": value, "source": f"{where}: ENV"}
                if accelerator:
                    entry["accelerator"] = accelerator
                found[(name, accelerator)] = entry
    return list(found.values())


def _instructions(dockerfile: str) -> list[tuple[str | None, str, str]]:
    """(accelerator block or None, ARG|ENV, the instruction's text with its continuation lines, comments dropped)."""
    out: list[tuple[str | None, str, str]] = []
    accelerator: str | None = None
    lines = iter(dockerfile.splitlines())
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("{{"):  # the template's accelerator blocks: if ... "gpu", else, end
            words = stripped.strip("{} ").split()
            accelerator = {"if": "gpu" if '"gpu"' in words else None, "else": "cpu" if accelerator == "gpu" else None
                           }.get(words[0] if words else "", None)
            continue
        keyword = stripped.split(" ", 1)[0]
        if keyword not in ("ENV", "ARG"):
            continue
        text = stripped[len(keyword):]
        while text.endswith("\\"):  # a continuation; Docker drops comment lines inside one
            following = next(lines, "").strip()
            if not following.startswith("#"):
                text = text[:-1] + " " + following
        out.append((accelerator, keyword, text))
    return out


def _expand(value: str, values: dict[str, str]) -> str:
    expanded = _REFERENCE.sub(lambda match: values.get(match.group(1) or match.group(2), _UNKNOWN), value)
    for separator in (":" + _UNKNOWN, _UNKNOWN + ":", _UNKNOWN):
        expanded = expanded.replace(separator, "", 1) if separator != _UNKNOWN else expanded.replace(separator, "")
    return expanded


def environment_section(dockerfile: str, where: str) -> dict[str, object]:
    """The image description's ``environment``: the Dockerfile's variables, then the runtime's."""
    return {"sources": [f"{where}: the ENV lines (the GPU image's own under its accelerator blocks; the Colab base "
                        "image publishes none, so a value it extends is taken as empty)",
                        "Kaggle's runtime: the KAGGLE_* variables docker-python's patches/ read, per-session ones as "
                        "inert stand-ins (builder/data/refresh_image.py RUNTIME_VARIABLES)"],
            "variables": [*dockerfile_environment(dockerfile, where), *(dict(entry) for entry in RUNTIME_VARIABLES)]}


def read_source(args: argparse.Namespace, name: str) -> str:
    if args.repo:
        return subprocess.run(["git", "-C", args.repo, "show", f"{args.ref}:{name}"], check=True, capture_output=True,
                              text=True).stdout
    with urllib.request.urlopen(f"{args.url.rstrip('/')}/{name}", timeout=60) as response:
        return response.read().decode("utf-8")


def commit_of(args: argparse.Namespace) -> tuple[str, str]:
    """(short hash, date) of the ref, for the sources line; the URL form knows neither."""
    if not args.repo:
        return args.url, date.today().isoformat()
    out = subprocess.run(["git", "-C", args.repo, "log", "-1", "--format=%h %ad", "--date=short", args.ref, "--", FREEZE],
                         check=True, capture_output=True, text=True).stdout.split()
    return out[0], out[1]


def build(args: argparse.Namespace) -> dict[str, object]:
    current = json.loads(TARGET.read_text(encoding="utf-8")) if TARGET.is_file() else {}
    cpu = parse_freeze(read_source(args, FREEZE))
    dockerfile = read_source(args, DOCKERFILE)
    python = _PYTHON.search(dockerfile)
    base = _BASE.search(dockerfile)
    commit, when = commit_of(args)
    packages = gpu_packages(cpu)
    return {
        "format": 2,
        "name": "Kaggle Python image (gcr.io/kaggle-gpu-images/python; the CPU image has the same packages)",
        "captured": when,
        "python": python.group(1) if python else str(current.get("python", "3.12")),
        "cuda": current.get("cuda", ""),
        "sources": [
            f"Kaggle/docker-python {args.ref} {commit} ({when}): {FREEZE}, the pip freeze of the CPU image "
            f"({len(cpu)} packages)",
            f"Kaggle/docker-python {args.ref} {commit}: {DOCKERFILE} (Python from PACKAGE_PATH; GPU base "
            f"{base.group(1) if base else 'unknown'})",
            "GPU image: no freeze is published; the same requirements on Colab's GPU runtime, so the CPU freeze with "
            f"{', '.join(PER_ACCELERATOR)} without their +cpu build label and the NVIDIA CUDA libraries by pattern",
            f"refreshed by builder/data/refresh_image.py on {date.today().isoformat()}",
        ],
        "verified": True,
        "packages": dict(sorted(packages.items())),
        "cpu_builds": {name: cpu[name] for name in PER_ACCELERATOR if name in cpu},
        "preinstalled_patterns": sorted({*current.get("preinstalled_patterns", []), *GPU_ONLY}),
        "import_names": import_names(packages, dict(current.get("import_names") or {})),
        "environment": environment_section(dockerfile, f"Kaggle/docker-python {args.ref} {commit}: {DOCKERFILE}"),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--repo", help="a git checkout of Kaggle/docker-python")
    where.add_argument("--url", help="a raw-file base URL of the ref, e.g. "
                                     "https://raw.githubusercontent.com/Kaggle/docker-python/list_packages")
    parser.add_argument("--ref", default=DEFAULT_REF, help=f"the branch or commit to read (default {DEFAULT_REF})")
    parser.add_argument("--out", type=Path, default=TARGET)
    args = parser.parse_args(argv)
    before = json.loads(args.out.read_text(encoding="utf-8")).get("packages", {}) if args.out.is_file() else {}
    data = build(args)
    args.out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    after: dict[str, str] = data["packages"]  # type: ignore[assignment]
    changed = sorted(name for name in before if name in after and before[name] != after[name])
    print(f"{args.out}: {len(after)} packages (was {len(before)}), Python {data['python']}; "
          f"{len(set(after) - set(before))} added, {len(set(before) - set(after))} gone, {len(changed)} changed version")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
