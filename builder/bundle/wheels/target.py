"""The target: which Python and platform the wheels must install on (the Kaggle image's, or kernel.toml's pin)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.tags import Tag, compatible_tags, cpython_tags

from builder.project.image_facts import ImageFacts
from builder.project.spec import KernelSpec

_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)_(\w+)$")
_LEGACY_MANYLINUX = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}


@dataclass(frozen=True)
class WheelTarget:
    python_version: str = "3.12"
    platform: str = "manylinux_2_35_x86_64"
    implementation: str = "cp"

    @classmethod
    def of(cls, spec: KernelSpec, image: ImageFacts) -> WheelTarget:
        """``[install] python_version`` when set, else the Python of ``image`` (the image the kernel's push gets)."""
        return cls(spec.install.python_version or image.python, spec.install.platform)

    @property
    def version_tuple(self) -> tuple[int, int]:
        major, minor = self.python_version.split(".")[:2]
        return int(major), int(minor)

    @property
    def arch(self) -> str:
        for prefix in ("manylinux_", "manylinux2014_", "manylinux2010_", "manylinux1_", "linux_"):
            if self.platform.startswith(prefix):
                rest = self.platform[len(prefix):]
                return rest.split("_", 2)[2] if prefix == "manylinux_" else rest
        return "x86_64"

    def platforms(self) -> list[str]:
        """The platform and every older one its machine also runs (pip itself does not widen manylinux_X_Y)."""
        name = self.platform
        for legacy, (major, minor) in _LEGACY_MANYLINUX.items():
            if name.startswith(legacy + "_"):
                name = f"manylinux_{major}_{minor}_{name[len(legacy) + 1:]}"
        match = _MANYLINUX.match(name)
        if not match:
            return [self.platform]
        major, minor, arch = int(match.group(1)), int(match.group(2)), match.group(3)
        result: list[str] = []
        for glibc in range(minor, 4, -1):
            result.append(f"manylinux_{major}_{glibc}_{arch}")
            for legacy, version in _LEGACY_MANYLINUX.items():
                if version == (major, glibc) and (legacy == "manylinux2014" or arch in ("x86_64", "i686")):
                    result.append(f"{legacy}_{arch}")
        return result

    def supported_tags(self) -> frozenset[Tag]:
        platforms = self.platforms()
        interpreter = f"{self.implementation}{self.version_tuple[0]}{self.version_tuple[1]}"
        return frozenset([*cpython_tags(self.version_tuple, platforms=platforms),
                          *compatible_tags(self.version_tuple, interpreter, platforms)])

    def pip_args(self) -> list[str]:
        args = ["--python-version", self.python_version, "--implementation", self.implementation]
        for name in self.platforms():
            args += ["--platform", name]
        return args

    def marker_environment(self) -> dict[str, str]:
        """PEP 508 marker values of the kernel's interpreter (pip evaluates markers for the running one)."""
        return {
            "implementation_name": "cpython", "implementation_version": f"{self.python_version}.0",
            "os_name": "posix", "platform_machine": self.arch, "platform_python_implementation": "CPython",
            "platform_release": "", "platform_system": "Linux", "platform_version": "",
            "python_full_version": f"{self.python_version}.0", "python_version": self.python_version,
            "sys_platform": "linux",
        }

    def describe(self) -> str:
        return f"{self.implementation}{self.python_version.replace('.', '')} {self.platform}"

    def to_json(self) -> dict[str, str]:
        return {"python_version": self.python_version, "platform": self.platform, "implementation": self.implementation}
