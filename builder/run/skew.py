"""Version skew between this environment and Kaggle's image, for the packages a run really imported.

The sandbox runs the kernel on the local interpreter, so its packages are the local versions. Where
they differ from the image's in a way that changes behaviour, a failure says nothing about Kaggle:
pandas 3's copy-on-write read-only arrays fail code that runs on the image's pandas 2. Each Python
process of the run records the top-level packages it imported (``guest/sitecustomize.py`` writes
``.sandbox/imports/<pid>.txt``); :func:`version_skews` maps them to distributions and compares:

- a different major version is a skew, for every package;
- for the packages known to break between minor versions (:data:`MINOR_BREAKING`), a different minor
  version is one too.

The dry run lists the skews in the report. A failure whose traceback runs through a skewed package
(:func:`skew_in_failure`) is "Not Rehearsed" naming both versions only when the skew can explain it; a shape,
dtype, missing-file, memory or blocked-network error stays Kaggle's verdict with the skew named beside it
(``builder.rehearse.diagnose``).
"""

from __future__ import annotations

import csv
import functools
import re
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from builder.project.image import KaggleImage, load_image
from builder.run.env_check import site_packages

IMPORTS_DIR = "imports"
# Packages whose minor releases change behaviour that inference code meets (defaults, dtypes, removed APIs).
MINOR_BREAKING = frozenset({"pandas", "numpy", "transformers", "scikit-learn"})
# Failures a skewed package causes outside its own frames: pandas 3's copy-on-write hands out read-only arrays, and
# the write fails in the caller's code.
SIGNATURES: dict[str, re.Pattern[str]] = {
    "pandas": re.compile(r"assignment destination is read-only|ChainedAssignmentError|SettingWithCopy"),
}
_FRAME = re.compile(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Skew:
    """One distribution whose local version differs from the image's enough to matter."""

    distribution: str
    local: str
    image: str
    modules: tuple[str, ...]  # the imported top-level modules it provides

    def describe(self) -> str:
        return f"{self.distribution} {self.local} here, {self.image} on Kaggle's image"


def recorded_imports(private_dir: Path) -> set[str]:
    """Every top-level module a process of the run imported from site-packages (its exit record)."""
    folder = Path(private_dir) / IMPORTS_DIR
    names: set[str] = set()
    if folder.is_dir():
        for record in folder.glob("*.txt"):
            try:
                names.update(line.strip() for line in record.read_text(encoding="utf-8").splitlines() if line.strip())
            except OSError:
                continue
    return names


def module_distributions() -> dict[str, tuple[str, ...]]:
    """``importlib.metadata.packages_distributions()``, a fraction of its cost: a wheel's RECORD is read as text, not
    turned into a path object per file (torch alone lists 20,000)."""
    return _installed()[0]


@functools.cache
def _installed() -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """(top-level module -> the distributions providing it, canonical distribution name -> version), in one pass over
    the installed distributions; the first of a name on ``sys.path`` is the one imported, as ``metadata.version``."""
    found: dict[str, list[str]] = {}
    versions: dict[str, str] = {}
    for dist in metadata.distributions():
        name, version = _name_and_version(dist)
        if not name:
            continue
        versions.setdefault(canonicalize_name(name), version)
        for module in _top_level(dist):
            found.setdefault(module, []).append(name)
    return {module: tuple(dists) for module, dists in found.items()}, versions


def _name_and_version(dist: metadata.Distribution) -> tuple[str, str]:
    """``Name`` and ``Version`` from the metadata's header block, read as text: ``dist.metadata`` runs the email parser
    over the whole file (long descriptions included), a millisecond a distribution."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    headers: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line; the description follows
        key, colon, value = line.partition(":")
        if colon and key in ("Name", "Version"):
            headers.setdefault(key, value.strip())
    return headers.get("Name", ""), headers.get("Version", "")


def _top_level(dist: metadata.Distribution) -> set[str]:
    """The top-level modules ``dist`` provides: ``top_level.txt``, else the first part of each ``.py`` it installed
    (the standard library's rule)."""
    declared = (dist.read_text("top_level.txt") or "").split()
    if declared:
        return set(declared)
    record = dist.read_text("RECORD")
    if record is None:
        return {f.parts[0] if len(f.parts) > 1 else f.with_suffix("").name for f in dist.files or () if f.suffix == ".py"}
    modules = set()
    for row in csv.reader(record.splitlines()):
        if row and row[0].endswith(".py"):
            head, nested, _ = row[0].partition("/")
            modules.add(head if nested else head[:-3])
    return modules


def local_version(distribution: str) -> str | None:
    """The installed version of ``distribution`` (any spelling of its name), None when it is not installed."""
    return _installed()[1].get(canonicalize_name(distribution)) or None


def differs(local: str, image: str, distribution: str) -> bool:
    """True when the versions differ in their major (or, for :data:`MINOR_BREAKING`, minor) number."""
    try:
        here, there = Version(local).release, Version(image).release
    except InvalidVersion:
        return False
    depth = 2 if canonicalize_name(distribution) in MINOR_BREAKING else 1
    return tuple(here[:depth]) != tuple(there[:depth])


def interpreter_versions(python: str | Path) -> dict[str, str] | None:
    """Every distribution's version as another interpreter sees it (``kkb env``'s: its own site-packages first, kkb's
    environment behind it), None for this one or one that is no ``kkb env`` environment. Read from its files (headers
    only, as :func:`_installed`; kkb's environment from that one scan): nothing of the environment runs here."""
    if Path(python) == Path(sys.executable):
        return None
    root = Path(python).parent.parent
    site = site_packages(root)
    if not (root / "pyvenv.cfg").is_file() or not site.is_dir():
        return None
    versions: dict[str, str] = {}
    for dist in metadata.distributions(path=[str(site)]):
        name, version = _name_and_version(dist)
        if name:
            versions.setdefault(canonicalize_name(name), version)
    for name, version in _installed()[1].items():
        versions.setdefault(name, version)
    return versions


def version_skews(modules: set[str], image: KaggleImage | None = None,
                  versions: dict[str, str] | None = None) -> tuple[Skew, ...]:
    """The skews among the distributions that provide ``modules`` (sorted by distribution); ``versions``: the
    kernel interpreter's, when it is not this one (:func:`interpreter_versions`)."""
    image = image or load_image()
    by_distribution: dict[str, set[str]] = {}
    for module in modules:
        for dist in module_distributions().get(module, ()):
            by_distribution.setdefault(canonicalize_name(dist), set()).add(module)
    skews = []
    for dist, provided in sorted(by_distribution.items()):
        local = versions.get(dist) if versions is not None else local_version(dist)
        there = image.packages.get(dist)
        if local and there and differs(local, there, dist):
            skews.append(Skew(dist, local, there, tuple(sorted(provided))))
    return tuple(skews)


def skew_in_failure(text: str, skews: tuple[Skew, ...]) -> Skew | None:
    """The skewed package the traceback in ``text`` runs through (its deepest frame in one), else None."""
    by_module = {module: skew for skew in skews for module in skew.modules}
    found = None
    for match in _FRAME.finditer(text):
        found = by_module.get(match.group(1), found)
    if found is None:
        found = next((skew for skew in skews if skew.distribution in SIGNATURES
                      and SIGNATURES[skew.distribution].search(text)), None)
    return found


def own_skews(skews: tuple[Skew, ...], own_modules: set[str] | None) -> tuple[Skew, ...]:
    """The skews of packages the kernel's own code (or its cards) imports; ``None``: every skew."""
    return skews if own_modules is None else tuple(skew for skew in skews if own_modules & set(skew.modules))


def skew_warnings(skews: tuple[Skew, ...], own_modules: set[str] | None = None) -> list[str]:
    """The summary's line: one warning naming the skews of what the kernel imports (none when there is none).

    ``own_modules``: the top-level modules the kernel's code and its cards import; a skew only kkb or a library
    pulled in (pyarrow under pandas, pytz) stays out of the line, and is in the report's ``version_skew``.
    """
    own = own_skews(skews, own_modules)
    if not own:
        return []
    more = len(skews) - len(own)
    rest = f" ({more} more in report.json: packages your code does not import)" if more else ""
    return ["version skew with Kaggle's image (a failure one of these explains is not rehearsed; kkb env builds the image's "
            "versions): " + "; ".join(skew.describe() for skew in own) + rest]


def skew_records(skews: tuple[Skew, ...], own_modules: set[str] | None) -> list[dict[str, object]]:
    """The report's ``version_skew``: every skew, and whether the kernel's own code imports it."""
    own = own_skews(skews, own_modules)
    return [{"distribution": skew.distribution, "local": skew.local, "image": skew.image, "modules": list(skew.modules),
             "kernel_imports": skew in own} for skew in skews]
