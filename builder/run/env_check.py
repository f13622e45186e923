"""Is a cached ``kkb env`` environment still what it was built as? Checked before every reuse, never trusted by stamp.

A stamp only says the environment was built once; files can be deleted since (a cache cleaner, a full
disk, a user's ``rm``). :func:`env_damage` compares the environment with its own record:

- the interpreter and the ``.pth`` line that lets kkb's environment show through are there;
- every distribution installed in the environment's own site-packages (the pins and what pip added
  for them) is there at its pinned version, and every file its ``RECORD`` lists exists with the
  recorded sha256;
- no file of its site-packages is outside every ``RECORD`` (an extra ``.pth`` file runs at every start of the
  interpreter, a stray module shadows a package): kkb's own ``.pth`` line is the only one allowed;
- no requirement of those distributions is broken (read from their metadata, as ``pip check`` reads it; one of kkb's
  own environment is not the cache's damage).

Nothing of the environment runs for the check: its interpreter is never started on this machine (the sandbox
starts it, :mod:`builder.rehearse.image_check`), its files are read, hashed and parsed. It returns what is damaged,
in words (empty when intact); :func:`builder.run.image_env.build_image_env` rebuilds a damaged environment, or
refuses naming the damage when it cannot.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import sys
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName, canonicalize_name

PTH_FILE = "zz-kkb-environment.pth"
SHOWN = 3  # damaged files named per distribution


def site_packages(root: Path) -> Path:
    return root / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def env_damage(root: Path, python: Path, pins: list[str]) -> list[str]:
    """What is wrong with the environment at ``root`` against its pins (``dist==version``); empty when intact."""
    if not python.exists():
        return [f"its interpreter {python} is missing"]
    site = site_packages(root)
    damage = [] if (site / PTH_FILE).is_file() else [f"{site / PTH_FILE} (kkb's environment behind it) is missing"]
    installed = {canonicalize_name(dist.metadata["Name"] or ""): dist
                 for dist in metadata.distributions(path=[str(site)]) if dist.metadata["Name"]}
    for pin in pins:
        name, _, version = pin.partition("==")
        dist = installed.get(canonicalize_name(name))
        if dist is None:
            damage.append(f"{pin} is not installed")
        elif dist.version != version:
            damage.append(f"{pin} is installed as {dist.version}")
    for name, dist in sorted(installed.items()):
        problem = record_damage(dist, site)
        if problem:
            damage.append(f"{name} {dist.version}: {problem}")
    return damage + unrecorded_files(site, installed.values()) + requirement_damage(installed)


def record_damage(dist: metadata.Distribution, site: Path) -> str | None:
    """Files of ``dist`` missing or changed against its RECORD (a few named), or None."""
    text = dist.read_text("RECORD")
    if text is None:
        return "its RECORD is missing"
    missing, changed = [], []
    for row in csv.reader(text.splitlines()):
        if len(row) < 2 or not row[1]:
            continue  # RECORD itself, and files recorded without a hash (.pyc)
        path = (site / row[0]).resolve()
        if not path.is_file():
            missing.append(row[0])
        elif _record_hash(path, row[1].partition("=")[0]) != row[1]:
            changed.append(row[0])
    if not missing and not changed:
        return None
    parts = []
    if missing:
        parts.append(f"{len(missing)} files missing ({', '.join(missing[:SHOWN])}{', …' if len(missing) > SHOWN else ''})")
    if changed:
        parts.append(f"{len(changed)} files changed ({', '.join(changed[:SHOWN])}{', …' if len(changed) > SHOWN else ''})")
    return " and ".join(parts)


def _record_hash(path: Path, algorithm: str) -> str:
    try:
        digest = hashlib.new(algorithm, path.read_bytes()).digest()
    except (ValueError, OSError):
        return ""
    return f"{algorithm}=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def unrecorded_files(site: Path, dists: Iterable[metadata.Distribution]) -> list[str]:
    """Files of ``site`` that no distribution's RECORD lists (kkb's ``.pth`` line and compiled caches excepted), named."""
    recorded = {PTH_FILE}
    for dist in dists:
        text = dist.read_text("RECORD") or ""
        recorded |= {os.path.normpath(row[0]) for row in csv.reader(text.splitlines()) if row}
    extra = sorted(relative for relative in _files(site) if relative not in recorded and "__pycache__" not in relative)
    if not extra:
        return []
    return [f"{len(extra)} file(s) of its site-packages in no RECORD ({', '.join(extra[:SHOWN])}"
            f"{', …' if len(extra) > SHOWN else ''}): not installed by pip, and a .pth file among them would run"]


def _files(site: Path) -> list[str]:
    found = []
    for folder, _, names in os.walk(site):
        found += [os.path.relpath(os.path.join(folder, name), site) for name in names]
    return found


def requirement_damage(installed: Mapping[NormalizedName, metadata.Distribution]) -> list[str]:
    """Requirements of the environment's own distributions that are missing or of another version, found in its
    site-packages first and kkb's environment behind it (as the environment's interpreter finds them): ``pip check``'s
    answer, without running anything."""
    available: dict[NormalizedName, metadata.Distribution] = {
        canonicalize_name(dist.metadata["Name"] or ""): dist for dist in metadata.distributions()}
    available.update(installed)
    damage = []
    for name, dist in sorted(installed.items()):
        for text in dist.requires or ():
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            found = available.get(canonicalize_name(requirement.name))
            if found is None:
                damage.append(f"{name} {dist.version} requires {requirement.name}, which is not installed")
            elif requirement.specifier and not requirement.specifier.contains(found.version, prereleases=True):
                damage.append(f"{name} {dist.version} has requirement {requirement}, but {found.version} is installed")
    return damage

