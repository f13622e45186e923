"""``kernel.toml``'s ``[install]`` section: the packages a kernel installs offline (``kkb wheels``)."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from builder.project.spec_values import StrictModel, check_id, check_requirements, check_unique, relative_path


class SourcePackage(StrictModel):
    name: str
    path: str
    cpp_ext: bool = False
    cuda_ext: bool = False
    extra_env: dict[str, str] = Field(default_factory=dict)

    @field_validator("path")
    @classmethod
    def _inside(cls, value: str) -> str:
        return relative_path(value)


class InstallSection(StrictModel):
    """Extra packages the kernel installs offline (``kkb wheels``).

    * ``requirements`` / ``requirements_file``: what the install cell installs, as pip requirements.
      ``kkb wheels`` resolves them with every transitive dependency into a wheelhouse, for the image's
      Python (``python_version``, default: the newest image kkb knows, so cp313 once Kaggle moves to Python 3.13)
      and ``platform`` (the newest manylinux the image satisfies; older manylinux tags are accepted too),
      leaving out what the Kaggle image already has (kkb's list plus ``exclude``, shell-style patterns such as
      ``nvidia-*``). A package named in ``requirements`` is shipped even if
      the image has it (you asked for that version); one in ``exclude`` never is.
    * ``wheelhouse``: *where* the wheels come from, as ``owner/slug``. By default kkb builds it:
      ``<owner>/<kernel-slug>-wheels``, which is a dataset (``kkb wheels``, in ``build/NAME/wheels/``)
      or, with ``on_kaggle = true``, the helper kernel of that name whose output holds wheels built in
      Kaggle's own image (``kkb wheels --on-kaggle``; attached through ``kernel_sources``). Set it to
      share one wheelhouse between kernels; kkb still builds and uploads it under that id. The
      inference kernel attaches it whenever there are requirements (or, on Kaggle, source packages).
    * ``source_packages``: trees in the kernel folder that compile (NVIDIA apex). They go into the code
      dataset automatically; the install cell compiles them (``cpp_ext``/``cuda_ext``,
      ``TORCH_CUDA_ARCH_LIST`` for the machine shape), or with ``on_kaggle`` installs the wheels the
      helper kernel built from them.
    """

    requirements: list[str] = Field(default_factory=list)
    requirements_file: str | None = None
    wheelhouse: str | None = None
    on_kaggle: bool = False
    source_packages: list[SourcePackage] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    # The wheels' Python: default the image's (the newest known image of the kernel's server, builder.project.image_facts).
    python_version: str | None = Field(default=None, pattern=r"^3\.\d{1,2}$")
    # Kaggle's image is built on Colab's Ubuntu 22.04 base (glibc 2.35).
    platform: str = "manylinux_2_35_x86_64"
    pip_version: str | None = None
    dependency_manager: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+$")

    @field_validator("requirements_file")
    @classmethod
    def _inside(cls, value: str | None) -> str | None:
        return None if value is None else relative_path(value)

    @field_validator("requirements")
    @classmethod
    def _pip_requirements(cls, values: list[str]) -> list[str]:
        return check_requirements(values)

    @field_validator("wheelhouse")
    @classmethod
    def _wheelhouse_id(cls, value: str | None) -> str | None:
        return check_id(value, "a dataset or kernel id", shortest=6)

    @model_validator(mode="after")
    def _unique_sources(self) -> InstallSection:
        check_unique([package.name for package in self.source_packages], "[[install.source_packages]] names")
        return self


__all__ = ["InstallSection", "SourcePackage"]
