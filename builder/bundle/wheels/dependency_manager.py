"""Kaggle's Dependency Manager: packages Kaggle installs before the kernel runs, from an attached ``pm-*`` input.

Kaggle's staff point people at it for offline competitions: the notebook's ``pip install`` lines are kept in
``input_requirements.txt`` and the packages in an input named ``pm-<digits>-at-<date>``, attached to the notebook;
before the kernel's code starts, Kaggle installs them from it, offline. In kkb the input is an ``[[inputs]]`` entry
(attached to the push as any input) and ``[install] dependency_manager`` names it. Here, with the input's files in
its stand-in folder:

- every line of ``input_requirements.txt`` is read as pip reads it (``builder.project.pm_requirements``);
- at build, each requirement must be installable offline: satisfied by Kaggle's image (its version), or a wheel for
  the image's Python in the input's folder. Anything else is named then (a wheel for another Python, after the image
  moved, included), not when the rerun fails;
- the dry run installs them as Kaggle's pre-run step does, offline from the input (``kkb_runtime.prerun``), before
  the kernel's code; what fails there fails the run, named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from builder.bundle.wheels.target import WheelTarget
from builder.errors import WheelhouseError
from builder.kkb_runtime.config import DependencyManagerSection
from builder.project.image import KaggleImage
from builder.project.image_facts import ImageFacts
from builder.project.pm_requirements import REQUIREMENTS_FILE, pip_lines
from builder.project.spec import SPEC_FILE, KernelSpec
from builder.project.spec_inputs import InputSection


@dataclass(frozen=True)
class DependencyManager:
    """What the Dependency Manager input brings, and where each requirement comes from offline."""

    input: InputSection
    folder: Path
    requirements: tuple[str, ...]
    from_image: tuple[str, ...] = ()       # Kaggle's image has it: its pip finds it installed
    from_input: tuple[str, ...] = ()       # a wheel for the image's Python in the input's folder
    notes: tuple[str, ...] = field(default=())

    def to_kernel(self) -> DependencyManagerSection:
        """What ``kkb_kernel.json`` carries for the dry run's pre-run step (Kaggle's own install needs nothing)."""
        return DependencyManagerSection(input=self.input.input_name, ref=self.input.ref, requirements=self.from_input,
                                        from_image=self.from_image)


def dependency_manager(spec: KernelSpec, kernel_dir: Path, image: ImageFacts, described: KaggleImage) -> DependencyManager | None:
    """The Dependency Manager input ``[install] dependency_manager`` names, read and checked; None when none is named.

    Raises :class:`WheelhouseError` naming each requirement that cannot be installed offline (see the module)."""
    name = spec.install.dependency_manager
    if name is None:
        return None
    item = next(entry for entry in spec.inputs if entry.input_name == name)  # the spec checked that one exists
    spec_path = Path(kernel_dir) / SPEC_FILE
    folder = item.stand_in(kernel_dir)
    if folder is None or not (folder / REQUIREMENTS_FILE).is_file():
        where = f"{folder / REQUIREMENTS_FILE}" if folder is not None else "its files (the input has no path)"
        raise WheelhouseError(f"{spec_path}: [install] dependency_manager = '{name}': no {where}",
                              hint=f"download the input ({item.ref}) into its stand-in folder, e.g. kaggle "
                                   f"{'kernels output' if item.kind == 'notebook' else 'datasets download'} {item.ref} "
                                   f"-p {item.path or 'inputs/' + name}")
    requirements = pip_lines((folder / REQUIREMENTS_FILE).read_text(encoding="utf-8"), str(folder / REQUIREMENTS_FILE))
    target = WheelTarget(image.python)
    wheels = _wheels(folder)
    from_image, from_input, problems = [], [], []
    for text in requirements:
        requirement = Requirement(text)
        if _image_has(requirement, described):
            from_image.append(text)
            continue
        fitting, other = _matching(requirement, wheels, target)
        if fitting:
            from_input.append(text)
        else:
            problems.append(f"{text}: " + (f"the input has {', '.join(other)}, which do(es) not install on {target.describe()}"
                                           if other else f"not in Kaggle's image, and no wheel for it in {folder}"))
    if problems:
        raise WheelhouseError(f"{spec_path}: [install] dependency_manager = '{name}': not installable offline on Kaggle's "
                              f"image ({image.describe()}):\n  " + "\n  ".join(problems),
                              hint="download the input's files again (the Dependency Manager rebuilds them for the image it "
                                   "runs now), or move the requirement to [install] requirements and run kkb wheels")
    notes = (f"[install] dependency_manager '{name}': {len(from_input)} package(s) from the input, {len(from_image)} "
             f"already in Kaggle's image; Kaggle installs them before the kernel runs, the dry run rehearses that",)
    return DependencyManager(item, folder, tuple(requirements), tuple(from_image), tuple(from_input), notes)


def _image_has(requirement: Requirement, described: KaggleImage) -> bool:
    have = described.packages.get(canonicalize_name(requirement.name))
    if have is None:
        return False
    try:
        return requirement.specifier.contains(Version(have), prereleases=True)
    except InvalidVersion:
        return not requirement.specifier


def _wheels(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*.whl") if path.is_file())


def _matching(requirement: Requirement, wheels: list[Path], target: WheelTarget) -> tuple[list[Path], list[str]]:
    """(wheels for ``requirement`` that install on ``target``, names of those that do not)."""
    supported = target.supported_tags()
    fitting, other = [], []
    for wheel in wheels:
        try:
            name, version, _, tags = parse_wheel_filename(wheel.name)
        except InvalidWheelFilename:
            continue
        if name != canonicalize_name(requirement.name) or not requirement.specifier.contains(version, prereleases=True):
            continue
        if tags & supported:
            fitting.append(wheel)
        else:
            other.append(wheel.name)
    return fitting, other


__all__ = ["DependencyManager", "dependency_manager"]
