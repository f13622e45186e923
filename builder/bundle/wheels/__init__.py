"""``kkb wheels``: the packages an internet-off kernel installs, resolved and checked before anything is pushed.

Two ways to get a wheelhouse, chosen by ``[install] on_kaggle`` (see ``InstallSection``'s docstring):

* **here** (default): ``pip`` resolves the requirements for the image's Python and platform
  (``--python-version/--platform/--implementation cp --only-binary=:all:``), every transitive
  dependency included, and the packages the Kaggle image already has are left out together with what
  only they need. What remains is downloaded into ``build/NAME/wheels/``, a dataset folder
  (``dataset-metadata.json`` + ``manifest.json`` with the *resolution key*) that the inference kernel
  attaches and installs from with ``pip install --no-index --find-links``. A package with no wheel is
  built here from its sdist: a pure-Python result is shipped as a wheel, anything else as the sdist
  (flagged: it compiles in the kernel).
* **on Kaggle** (recommended for compiled packages): a helper kernel with internet on builds every
  wheel, source packages such as apex included, inside Kaggle's own image and keeps them as its
  output; the inference kernel attaches it through ``kernel_sources``.

The resolution key is a hash of what decides the result (requirements, target, exclusions, for the
helper also the source trees and the script): unchanged, nothing is resolved, built or uploaded again.

:func:`check_offline_install` is the dry run's check: a fresh virtual environment of the target
Python, ``pip install --no-index`` from the wheelhouse alone and no network, with metadata-only
stand-ins for the packages the image provides. A wheel the target cannot install is refused by name.

Its modules, in the order a build uses them: ``target`` (the image's Python and platform), ``sources`` (what
a kernel asks for), ``key`` (the resolution key, and whether the built wheelhouse is current), ``resolve``
(pip's resolution, what the image provides left out), ``download`` (the wheelhouse built here), ``check``
(the offline install), ``drift`` (Kaggle's image moved since: what is stale), ``attach`` (what ``kkb push``
attaches), and ``commands`` (pip, wheels and stand-ins, under all of them). The rest of kkb imports from here.
"""

from __future__ import annotations

from builder.bundle.wheels.attach import wheelhouse_to_push
from builder.bundle.wheels.check import OfflineCheck, check_kernel_wheels, check_offline_install, incompatible_wheels, refuse_incompatible_wheels
from builder.bundle.wheels.commands import distribution_name, find_python, stand_in
from builder.bundle.wheels.download import WheelhouseOptions, WheelsResult, build_wheelhouse
from builder.bundle.wheels.drift import WheelDrift, dataset_drift, helper_drift
from builder.bundle.wheels.key import FORMAT, HELPER_RECORD, WHEELHOUSE_FILE, read_record, resolution_key
from builder.bundle.wheels.resolve import MAX_SDIST_FALLBACKS
from builder.bundle.wheels.sources import (
    WheelSource,
    helper_title,
    install_context,
    keep_wheel_folders,
    kernel_requirements,
    kernel_sources,
    source_package_files,
    wheelhouse_source,
)
from builder.bundle.wheels.target import WheelTarget

__all__ = [
    "FORMAT", "HELPER_RECORD", "MAX_SDIST_FALLBACKS", "WHEELHOUSE_FILE", "OfflineCheck", "WheelDrift", "WheelSource", "WheelTarget",
    "WheelhouseOptions", "WheelsResult", "build_wheelhouse", "check_kernel_wheels", "check_offline_install", "dataset_drift",
    "helper_drift",
    "distribution_name", "find_python", "helper_title", "incompatible_wheels", "install_context", "keep_wheel_folders",
    "kernel_requirements", "kernel_sources", "read_record", "refuse_incompatible_wheels", "resolution_key",
    "source_package_files", "stand_in", "wheelhouse_source", "wheelhouse_to_push",
]
