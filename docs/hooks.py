"""MkDocs hook: the kernel.toml reference page's keys, generated from the spec's models at build time."""

from __future__ import annotations

from typing import Any

from builder.project.spec_reference import render_reference

MARKER = "<!-- kernel.toml keys: generated -->"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    return markdown.replace(MARKER, render_reference()) if MARKER in markdown else markdown
