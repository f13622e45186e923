"""``pip`` inside the sandbox, as on Kaggle's image: a requirement the image already satisfies is a no-op.

On Kaggle a leftover ``!pip install scikit-learn`` finds the image's copy and changes nothing, offline.
Here the interpreter is the local one, which may lack the package: this shim (first on the kernel's
``PATH`` as ``pip`` and ``pip3``) drops from a plain ``pip install`` every requirement that the image's
version satisfies (``KKB_IMAGE_PACKAGES``: a JSON table of canonical name -> version), says so as pip
would, and runs the real pip (``python -m pip``) for the rest, or not at all when nothing is left. A
requirement the image lacks still goes to the real pip, whose download the sandbox blocks
("blocked network access: <host>" in the report). Anything but a plain install (``-r``, ``-U``,
``--force-reinstall``, ``--target``, a path or URL) is passed through unchanged.

Standard library (and ``packaging`` where the interpreter has it); never imports ``builder``.
"""

from __future__ import annotations

import json
import os
import re
import sys

# Options that change what "already satisfied" means: the real pip decides.
PASS_THROUGH = {"-r", "--requirement", "-U", "--upgrade", "--force-reinstall", "-t", "--target", "-e", "--editable",
                "--prefix", "--root", "-I", "--ignore-installed"}
# Options followed by a value (their value is no requirement).
TAKES_VALUE = {"-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--src",
               "--upgrade-strategy", "--python-version", "--platform", "--implementation", "--abi", "--only-binary",
               "--no-binary", "--progress-bar", "--root-user-action", "--trusted-host", "--proxy", "--retries",
               "--timeout", "--cache-dir", "--log", "--report", "--config-settings", "-C", "--global-option"}
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(.*)$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def satisfied(requirement: str, image: dict[str, str]) -> str | None:
    """The image's version when it satisfies ``requirement`` (``name``, ``name==1.2``, ``name>=1``), else None."""
    match = _NAME.match(requirement.strip())
    if match is None or "/" in requirement or requirement.endswith((".whl", ".tar.gz", ".zip")):
        return None
    version = image.get(canonical(match.group(1)))
    specifier = match.group(3).split(";")[0].strip()
    if version is None:
        return None
    if not specifier:
        return version
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return None
    try:
        return version if SpecifierSet(specifier).contains(Version(version), prereleases=True) else None
    except (InvalidSpecifier, InvalidVersion):
        return None


def split_install(args: list[str], image: dict[str, str]) -> tuple[list[str], list[tuple[str, str]], int] | None:
    """``(the args left for the real pip, [(requirement, image version) dropped], requirements left)``; None: pass
    everything through."""
    if not args or args[0] != "install" or any(arg.split("=")[0] in PASS_THROUGH for arg in args):
        return None
    kept, dropped = [args[0]], []
    left = 0
    options_with_value = False
    for arg in args[1:]:
        if options_with_value:
            kept.append(arg)
            options_with_value = False
            continue
        if arg.startswith("-"):
            kept.append(arg)
            options_with_value = arg in TAKES_VALUE
            continue
        version = satisfied(arg, image)
        if version is None:
            kept.append(arg)
            left += 1
        else:
            dropped.append((arg, version))
    return kept, dropped, left


def main(argv: list[str]) -> int:
    try:
        image = json.loads(open(os.environ["KKB_IMAGE_PACKAGES"], encoding="utf-8").read())
    except (KeyError, OSError, ValueError):
        image = {}
    split = split_install(argv, image)
    if split is not None:
        kept, dropped, left = split
        for requirement, version in dropped:
            print(f"Requirement already satisfied: {requirement} (Kaggle's image has {version}; kkb's sandbox pip)")
        if dropped and not left:
            return 0
        argv = kept
    os.execv(sys.executable, [sys.executable, "-m", "pip", *argv])
    return 127  # pragma: no cover - execv does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
