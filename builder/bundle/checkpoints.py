"""Build-time view of a card's checkpoints: which files (folds) a card names, and what they read.

A card's ``checkpoint`` is one path, a glob (``weights/effnet_fold*.pth``) or a list; each pattern
must match at least one file in the kernel folder, in sorted order, so fold order (and therefore
``fold_weights``) is stable. No torch here: ``kkb build`` selects files before it imports anything
heavy.
"""

from __future__ import annotations

import glob
from pathlib import Path

from builder.errors import BundleError
from builder.project.spec import SPEC_FILE, ModelCard

GLOB_CHARACTERS = "*?["


def checkpoint_sources(card: ModelCard, kernel_dir: Path, must_exist: bool = True) -> list[str]:
    """Every checkpoint file the card names, relative to the kernel folder (globs expanded, sorted).

    ``must_exist=False`` passes plain paths through unchecked, for a caller that reports a missing file itself.
    """
    found: list[str] = []
    for pattern in card.checkpoint_patterns:
        if any(character in pattern for character in GLOB_CHARACTERS):
            matches = sorted(Path(path).relative_to(kernel_dir).as_posix()
                             for path in glob.glob(str(kernel_dir / pattern), recursive=True) if Path(path).is_file())
            if not matches:
                raise BundleError(f"{kernel_dir / SPEC_FILE}: models.{card.name}.checkpoint: '{pattern}' matches no file "
                                 f"in {kernel_dir}", hint="train or copy the fold checkpoints there first, or fix the pattern")
        else:
            if must_exist and not (kernel_dir / pattern).is_file():
                raise BundleError(f"{kernel_dir / SPEC_FILE}: models.{card.name}.checkpoint: missing weight file {pattern}",
                                 hint=f"put the checkpoint at {kernel_dir / pattern} or fix the path")
            matches = [pattern]
        found += [match for match in matches if match not in found]
    if card.fold_weights is not None and len(card.fold_weights) != len(found):
        raise BundleError(f"{kernel_dir / SPEC_FILE}: models.{card.name}.fold_weights: {len(card.fold_weights)} weights "
                         f"for {len(found)} checkpoints ({', '.join(found)})",
                         hint="give one weight per checkpoint, in the sorted order shown, or remove fold_weights")
    return found


__all__ = ["checkpoint_sources"]
