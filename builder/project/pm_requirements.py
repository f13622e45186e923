"""Kaggle's Dependency Manager input (``pm-<digits>-at-<date>``) and its ``input_requirements.txt``, read as pip reads it.

Kaggle keeps a notebook's Dependency Manager packages in an input of that name, with their ``pip install`` lines in
``input_requirements.txt``. A line may be ``pip install A B==1``, ``!pip``/``%pip``, ``python -m pip install``, or a bare
requirement; options that only change how pip installs are ignored, one that needs the network (``--index-url``,
``-r``, ``-e``, a URL, a path) is refused naming the line: the install is offline.
"""

from __future__ import annotations

import re
import shlex

from packaging.requirements import InvalidRequirement, Requirement

from builder.errors import WheelhouseError

REQUIREMENTS_FILE = "input_requirements.txt"
PM_SLUG = re.compile(r"^pm-\d+-at-")  # how Kaggle names a Dependency Manager input
_IGNORED = {"-U", "--upgrade", "-q", "--quiet", "-v", "--verbose", "--no-cache-dir", "--no-deps", "--pre",
            "--force-reinstall", "--no-warn-script-location", "--disable-pip-version-check", "--user", "--no-index",
            "--progress-bar=off", "--root-user-action=ignore"}
_PREFIXES = (("python", "-m", "pip", "install"), ("python3", "-m", "pip", "install"), ("pip", "install"),
             ("pip3", "install"))


def is_dependency_manager(slug: str) -> bool:
    return PM_SLUG.match(slug) is not None


def pip_lines(text: str, where: str) -> list[str]:
    """The requirements in ``input_requirements.txt``'s lines (see the module docstring)."""
    requirements: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip().lstrip("!%").strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            words = shlex.split(stripped, comments=True)
        except ValueError as exc:
            raise WheelhouseError(f"{where}:{number}: '{line.strip()}' is not a pip command: {exc}",
                                  hint="write one `pip install NAME==VERSION` per line") from None
        for prefix in _PREFIXES:
            if tuple(words[:len(prefix)]) == prefix:
                words = words[len(prefix):]
                break
        for word in words:
            if word in _IGNORED:
                continue
            if word.startswith("-") or "://" in word or word.startswith((".", "/")):
                raise WheelhouseError(f"{where}:{number}: '{word}' needs an index, a file or the network, which an "
                                      "offline install does not have", hint="list packages by name and version only")
            try:
                requirements.append(str(Requirement(word)))
            except InvalidRequirement as exc:
                raise WheelhouseError(f"{where}:{number}: '{word}' is not a pip requirement: {exc}",
                                      hint="write it as pip would take it, e.g. kmodes==0.12.2") from None
    return requirements


__all__ = ["PM_SLUG", "REQUIREMENTS_FILE", "is_dependency_manager", "pip_lines"]
