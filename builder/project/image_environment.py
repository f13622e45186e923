"""The kernel's environment in Kaggle's image description: what the dry run gives a kernel instead of this machine's.

``environment`` in the description (:mod:`builder.project.kaggle_env` reads it) is the ``ENV`` lines of docker-python's
``Dockerfile.tmpl`` (the GPU image's own under its ``{{ if eq .Accelerator "gpu" }}`` blocks) and the runtime's
``KAGGLE_*`` variables (:data:`RUNTIME_VARIABLES`, read by docker-python's ``patches/``), per-session secrets as inert
stand-ins. ``kkb image --refresh`` (:mod:`builder.project.image_refresh`) writes it.
"""

from __future__ import annotations

import re

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
                        "inert stand-ins (builder/project/image_environment.py RUNTIME_VARIABLES)"],
            "variables": [*dockerfile_environment(dockerfile, where), *(dict(entry) for entry in RUNTIME_VARIABLES)]}


__all__ = ["RUNTIME_VARIABLES", "dockerfile_environment", "environment_section"]
