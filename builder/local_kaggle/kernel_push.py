"""What the local Kaggle takes of a pushed kernel (``SaveKernel``'s code, checked as Kaggle checks it; a refusal
answered in the body) and what it shows of one (the API's metadata)."""

from __future__ import annotations

from collections.abc import Callable

import nbformat

from builder.kkb_runtime.vocabulary import KernelForm
from builder.local_kaggle.wire import Call, Json, compact, iso, now


class PushRefused(Exception):
    """A push Kaggle answers with ``error`` in the body (the client prints it and exits 0)."""


# What a kernel's record takes from its newest version's metadata.
KERNEL_FIELDS = ("title", "language", "kernelType", "isPrivate", "enableGpu", "enableTpu", "enableInternet",
                 "machineShape", "dockerImage", "keywords", "datasetSources", "competitionSources", "kernelSources",
                 "modelSources")


def check_notebook(text: str) -> None:
    """A notebook's code must be a notebook (nbformat 4)."""
    try:
        nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises several unrelated types for bad JSON
        raise PushRefused(f"The notebook is not valid: {exc}") from None


# What Kaggle checks of each kernel form's code at push: a notebook must be one; a script is taken as text.
CODE_CHECKS: dict[KernelForm, Callable[[str], None] | None] = {
    KernelForm.NOTEBOOK: check_notebook,
    KernelForm.SCRIPT: None,
}


def check_code(call: Call) -> None:
    """SaveKernel's code as Kaggle checks it: some text, a known form and language, the form's own check."""
    if not call.text("text"):
        raise PushRefused("The kernel has no code (text is empty)")
    kernel_type = call.text("kernelType", "notebook").lower()
    if kernel_type not in KernelForm.values():
        raise PushRefused(f"Invalid kernel type {kernel_type!r}")
    if call.text("language", "python").lower() not in ("python", "r", "rmarkdown"):
        raise PushRefused(f"Invalid language {call.text('language')!r}")
    check = CODE_CHECKS[KernelForm(kernel_type)]
    if check is not None:
        check(call.text("text"))


def api_metadata(record: Json, meta: Json) -> Json:
    """A kernel as the API shows it (GetKernel's ``metadata``, ListKernels' rows): its record and a version's metadata."""
    ref = f"{record['owner']}/{record['slug']}"
    return compact({
        "id": record["id"], "ref": ref, "title": record["title"], "author": record["owner"], "slug": record["slug"],
        "language": meta.get("language"), "kernelType": meta.get("kernelType"), "isPrivate": meta.get("isPrivate"),
        "enableGpu": meta.get("enableGpu"), "enableTpu": meta.get("enableTpu"),
        "enableInternet": meta.get("enableInternet"), "categoryIds": meta.get("keywords", []),
        "datasetDataSources": meta.get("datasetSources", []),
        "competitionDataSources": meta.get("competitionSources", []),
        "kernelDataSources": meta.get("kernelSources", []), "modelDataSources": meta.get("modelSources", []),
        "currentVersionNumber": record.get("latestVersion"), "dockerImage": meta.get("dockerImage"),
        "machineShape": meta.get("machineShape"),
        "lastRunTime": iso(record.get("lastPushed") or record.get("created") or now()),
    })
