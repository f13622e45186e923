"""What of this machine a namespaced sandbox shows: what a Kaggle image has, and nothing of the people who use it.

Both launchers (bubblewrap, kkb's own) build the kernel's root from three lists made here:

- :data:`SYSTEM_FOLDERS`: the top-level system folders an image has (``/usr``, ``/bin``, ``/lib*``, ``/etc``);
  home folders, ``/root``, ``/opt``, ``/var``, ``/run``, ``/mnt``, ``/srv``, a checkout's ``/work`` are never shown
  (an interpreter that lives in one, a conda in ``/opt/conda``, is shown by its own folder);
- :func:`masked_paths`: what an ordinary user of this machine cannot read below them (``/etc/shadow``,
  ``/etc/gshadow``, ``/etc/ssl/private``, ...), shown empty: a kernel running as root reads no secret of the host's;
- :func:`interpreter_folders`: the host folders kkb's interpreter needs at their own paths, where they lie outside the
  system folders (a pyenv under ``/root``, a venv in a checkout, kkb's own package): its prefixes, its import path
  (not the folder it was started in), the folders an editable install maps its packages to, and
  ``$LD_LIBRARY_PATH``'s (the kernel keeps this machine's, for CUDA's libraries).

``/root`` itself is the sandbox's private, empty home (the interpreter's folder below it, where it lies there).
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from pathlib import Path

from builder.run.guest.newroot import SYSTEM_FOLDERS

PACKAGE = Path(__file__).resolve().parents[1]  # builder/: the guests the sandbox runs (card_guest, the scorer) import it
MASKED_UNDER = ("/etc",)  # where secrets of the host live in files an ordinary user cannot read
OTHERS_READ = stat.S_IROTH
OTHERS_ENTER = stat.S_IROTH | stat.S_IXOTH


@functools.cache
def masked_paths() -> tuple[str, ...]:
    """Every file and folder under :data:`MASKED_UNDER` that users other than its owner cannot read (a folder: enter),
    outermost first; nothing below a masked folder is listed."""
    found: list[str] = []
    for top in MASKED_UNDER:
        for folder, folders, files in os.walk(top, followlinks=False):
            kept = []
            for name in sorted(folders):
                path = os.path.join(folder, name)
                if _unreadable(path, OTHERS_ENTER):
                    found.append(path)
                else:
                    kept.append(name)
            folders[:] = kept
            found += [os.path.join(folder, name) for name in sorted(files)
                      if _unreadable(os.path.join(folder, name), OTHERS_READ)]
    return tuple(found)


def _unreadable(path: str, bits: int) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if stat.S_ISLNK(info.st_mode):
        return False  # a link shows what it points to: a masked target stays masked
    return info.st_mode & bits != bits


@functools.cache
def interpreter_folders() -> tuple[Path, ...]:
    """The host folders outside the system ones that kkb's interpreter and package need inside the sandbox, outermost
    only (see the module docstring)."""
    candidates = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), Path(sys.base_exec_prefix),
                  Path(sys.executable).parent, Path(os.path.realpath(sys.executable)).parent, PACKAGE,
                  *_import_path(), *_editable_targets(), *_library_path()]
    paths = {os.path.abspath(candidate) for candidate in candidates if candidate.is_absolute()}
    paths |= {os.path.realpath(path) for path in paths}
    found: list[Path] = []
    for path in sorted(Path(entry) for entry in paths if os.path.isdir(entry)):
        if _shown_anyway(path) or any(path.is_relative_to(folder) for folder in found):
            continue
        found.append(path)
    return tuple(found)


def _import_path() -> list[Path]:
    """``sys.path`` without its first entry where that is the folder kkb was started from (or its script's), and without
    ``$PYTHONPATH``'s entries: the kernel's environment sets its own."""
    entries = list(sys.path)
    if entries and not (sys.flags.safe_path or sys.flags.isolated):
        entries = entries[1:]
    own = {os.path.abspath(entry) for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry}
    return [Path(entry) for entry in entries if entry and os.path.abspath(entry) not in own]


def _library_path() -> list[Path]:
    """``$LD_LIBRARY_PATH``'s folders (the kernel's environment keeps this machine's: CUDA's libraries live there)."""
    return [Path(entry) for entry in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if entry]


def _editable_targets() -> list[Path]:
    """Where an editable install's import hook finds its packages (setuptools' ``MAPPING`` and ``NAMESPACES``)."""
    targets: list[Path] = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("__editable__") or module is None:
            continue
        mapping = getattr(module, "MAPPING", None)
        if isinstance(mapping, dict):
            targets += [Path(value) for value in mapping.values() if isinstance(value, str)]
        namespaces = getattr(module, "NAMESPACES", None)
        if isinstance(namespaces, dict):
            targets += [Path(value) for values in namespaces.values() if isinstance(values, list) for value in values]
    return targets


def _shown_anyway(path: Path) -> bool:
    """Under a system folder (shown already), or the whole file system."""
    parts = path.parts
    return len(parts) < 2 or parts[1] in SYSTEM_FOLDERS


__all__ = ["SYSTEM_FOLDERS", "interpreter_folders", "masked_paths"]
