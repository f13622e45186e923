"""``[[inputs]]`` of ``kernel.toml``: what the kernel reads that kkb does not build (a dataset, a Model, another
notebook's output), attached as Kaggle attaches it, with the local stand-in the dry run mounts in its place."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationInfo, field_validator

from builder.project.spec_values import StrictModel, check_input_kind, parse_input_ref


class InputSection(StrictModel):
    """An input kkb does not build, attached as Kaggle attaches it (one kernel-metadata source each).

    ``kind`` picks the list (dataset → ``dataset_sources``, model → ``model_sources``, notebook →
    ``kernel_sources``), ``ref`` is the entry as written there, ``path`` the local stand-in folder the
    dry run mounts where Kaggle would (relative to the kernel folder, absolute, or ``~/…``), ``name``
    what the runtime's ``find_input`` takes (default: the slug, or the model's slug).
    """

    kind: str
    ref: str
    path: str | None = None
    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+$")

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        return check_input_kind(value)

    @field_validator("ref")
    @classmethod
    def _ref_shape(cls, value: str, info: ValidationInfo) -> str:
        kind = info.data.get("kind")
        if kind is not None:  # an unknown kind is reported on its own
            parse_input_ref(kind, value)
        return value

    @property
    def parts(self) -> tuple[str, ...]:
        return parse_input_ref(self.kind, self.ref)

    @property
    def input_name(self) -> str:
        return self.name or self.parts[1]

    @property
    def source(self) -> str:
        """kernel-metadata's entry: a dataset or notebook pinned to a version keeps it there too."""
        return self.ref

    def stand_in(self, kernel_dir: Path) -> Path | None:
        """``path`` resolved: ``~`` expanded, a relative path taken from the kernel folder (None: not set)."""
        return None if self.path is None else Path(kernel_dir) / Path(self.path).expanduser()

    @property
    def mount_target(self) -> str:
        """Where Kaggle mounts it under ``/kaggle/input`` (current layout)."""
        parts = self.parts
        if self.kind == "model":
            return "models/" + "/".join(parts)
        return f"{'datasets' if self.kind == 'dataset' else 'notebooks'}/{parts[0]}/{parts[1]}"
