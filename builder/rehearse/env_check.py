"""Is a cached ``kkb env`` environment still what it was built as? Checked before every reuse, never trusted by stamp.

A stamp only says the environment was built once; files can be deleted since (a cache cleaner, a full
disk, a user's ``rm``). :func:`env_damage` compares the environment with its own record:

- the interpreter and the ``.pth`` line that lets kkb's environment show through are there;
- every distribution installed in the environment's own site-packages (the pins and what pip added
  for them) is there at its pinned version, and every file its ``RECORD`` lists exists with the
  recorded sha256;
- ``pip check`` finds no broken requirement of those distributions (one of kkb's own environment is
  not the cache's damage).

It returns what is damaged, in words (empty when intact); :func:`builder.rehearse.image_env.build_image_env`
rebuilds a damaged environment, or refuses naming the damage when it cannot.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name

PTH_FILE = "zz-kkb-environment.pth"
CHECK_SECONDS = 120
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
    return damage + pip_check_damage(python, set(installed))


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


def pip_check_damage(python: Path, names: set[str]) -> list[str]:
    """``pip check`` lines about a distribution of the environment's own (kkb's environment may have its own)."""
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "check", "--disable-pip-version-check"],
                             capture_output=True, text=True, timeout=CHECK_SECONDS)
    except (OSError, subprocess.SubprocessError):
        return []  # pip itself could not run: the RECORD check above still holds
    return [f"pip check: {line.strip()}" for line in out.stdout.splitlines()
            if line.strip() and canonicalize_name(line.split()[0]) in names]
