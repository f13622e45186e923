"""A dataset's metadata as ``kaggle datasets metadata`` reads (GetDatasetMetadata) and writes it (UpdateDatasetMetadata).

Shapes are kagglesdk's: the answer is ``{info: DatasetInfo}`` (ids, title..., ``licenses``,
``collaborators [{username, role}]``, ``data [{name, description, totalBytes, columns}]`` — the
frictionless "resources" of dataset-metadata.json, as Kaggle returns them — and the counters
``totalViews``/``totalVotes``/``totalDownloads``); the update sends ``settings: DatasetSettings`` and
gets ``{errors: [...]}`` back (the client prints them and exits 1). Counters are real here: views are
GetDataset/GetDatasetMetadata calls by others than the owner, downloads are DownloadDataset calls;
there are no votes on a local Kaggle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from builder.local_kaggle import names
from builder.local_kaggle.wire import Json, compact

ROLES = ("READER", "WRITER")


def dataset_info(record: Json, files: Sequence[tuple[str, int]]) -> Json:
    """``DatasetInfo`` of ``record``; ``files`` are the current version's ``(name, bytes)``."""
    described = record.get("fileInfo", {})
    counters = record.get("counters", {})
    return compact({
        "datasetId": record["id"], "datasetSlug": record["slug"], "ownerUser": record["owner"],
        "title": record["title"], "subtitle": record["subtitle"] or None,
        "description": record["description"] or None, "isPrivate": record["isPrivate"],
        "keywords": record["keywords"], "licenses": [{"name": record["licenseName"]}],
        "collaborators": [dict(c) for c in record.get("collaborators", [])],
        "data": [compact({"name": name, "totalBytes": size, "description": described.get(name, {}).get("description"),
                          "columns": described.get(name, {}).get("columns", [])}) for name, size in files],
        "totalViews": int(counters.get("views", 0)), "totalVotes": 0,
        "totalDownloads": int(counters.get("downloads", 0)),
        "expectedUpdateFrequency": record.get("expectedUpdateFrequency") or None,
        "userSpecifiedSources": record.get("userSpecifiedSources") or None,
    })


def apply_settings(record: Json, settings: object, file_names: set[str], is_user: Callable[[str], bool],
                   licenses: frozenset[str]) -> list[str]:
    """Validate ``DatasetSettings`` and, when all is well, apply it to ``record``; the problems otherwise."""
    if not isinstance(settings, dict):
        return ["settings must be an object"]
    errors: list[str] = []
    title = str(settings.get("title") or record["title"])
    if not 6 <= len(title) <= 50:
        errors.append("The dataset title must be between 6 and 50 characters")
    subtitle = str(settings.get("subtitle") or "")
    if subtitle and not 20 <= len(subtitle) <= 80:
        errors.append("The dataset subtitle must be between 20 and 80 characters")
    license_names = [str((entry or {}).get("name", "")) for entry in settings.get("licenses") or []]
    if len(license_names) > 1:
        errors.append("A dataset has exactly one license")
    errors += [f"Invalid license {name!r}" for name in license_names if name not in licenses]
    collaborators, problems = _collaborators(settings.get("collaborators") or [], record["owner"], is_user)
    errors += problems
    file_info, problems = _file_info(settings.get("data") or [], file_names)
    errors += problems
    if errors:
        return errors
    record.update({
        "title": title, "subtitle": subtitle or record["subtitle"],
        "description": str(settings.get("description") or record["description"]),
        "isPrivate": bool(settings.get("isPrivate", False)),
        "keywords": [str(k) for k in settings.get("keywords") or []],
        "collaborators": collaborators,
        "fileInfo": {**record.get("fileInfo", {}), **file_info},
        "expectedUpdateFrequency": str(settings.get("expectedUpdateFrequency") or ""),
        "userSpecifiedSources": str(settings.get("userSpecifiedSources") or ""),
    })
    if license_names:
        record["licenseName"] = license_names[0]
    return []


def _collaborators(entries: list[Any], owner: str, is_user: Callable[[str], bool]) -> tuple[list[Json], list[str]]:
    kept, errors = [], []
    for entry in entries:
        entry = entry if isinstance(entry, dict) else {}
        username = str(entry.get("username") or "")
        role = str(entry.get("role") or "READER").upper()
        if not names.is_slug(username) or not is_user(username):
            errors.append(f"Unknown collaborator {username!r}")
        elif username == owner:
            errors.append(f"{username} owns the dataset and cannot be a collaborator")
        elif role not in ROLES:
            errors.append(f"Invalid collaborator role {role!r} for {username}: use reader or writer")
        else:
            kept.append({"username": username, "role": role})
    return kept, errors


def _file_info(entries: list[Any], file_names: set[str]) -> tuple[dict[str, Json], list[str]]:
    info: dict[str, Json] = {}
    errors = []
    for entry in entries:
        entry = entry if isinstance(entry, dict) else {}
        name = str(entry.get("name") or "")
        if name not in file_names:
            errors.append(f"File {name!r} is not in the dataset's current version")
            continue
        columns = [compact({"name": str(c.get("name", "")), "description": c.get("description") or None,
                            "type": c.get("type") or None}) for c in entry.get("columns") or [] if isinstance(c, dict)]
        info[name] = compact({"description": entry.get("description") or None, "columns": columns})
    return info, errors
