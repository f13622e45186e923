"""What a kernel's own code imports: the packages whose version skew the dry run's summary names.

The kernel's ``.py`` files (their ``import`` lines, read without running them) and the libraries its cards run
(``builder.bundle.cards.BUILD_CARDS``: a text card's transformers). A skew of anything else (pyarrow under pandas, pytz) is
in the report's ``version_skew``, not in the summary's line.
"""

from __future__ import annotations

from pathlib import Path

from builder.bundle.cards import BUILD_CARDS
from builder.project.spec import KernelSpec
from builder.run.image_env import kernel_modules


def own_modules(kernel_dir: Path, spec: KernelSpec) -> set[str]:
    """The top-level modules the kernel's code and its cards import."""
    cards = {module for card in spec.models for module in BUILD_CARDS[card.kind].modules(card)}
    return kernel_modules(Path(kernel_dir)) | cards
