"""Kaggle ids and slugs, one rule each: a kernel's slug is ``slugify(title)``; dataset slugs are 6-50 characters."""

from __future__ import annotations

from slugify import slugify

__all__ = ["dataset_slug", "dataset_title", "kernel_slug", "slugify"]


def kernel_slug(title: str) -> str:
    """The slug Kaggle gives a kernel of this title (and the one kkb requires in ``id``)."""
    return slugify(title)


def dataset_slug(kernel_slug: str, suffix: str) -> str:
    """``<kernel-slug>-<suffix>``, cut so that Kaggle's client accepts it (at most 50 characters)."""
    return f"{kernel_slug[: 49 - len(suffix)].rstrip('-')}-{suffix}"


def dataset_title(explicit: str | None, kernel_title: str, suffix: str) -> str:
    return explicit or f"{kernel_title[: 49 - len(suffix)].rstrip()} {suffix}"
