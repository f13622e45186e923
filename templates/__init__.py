"""kkb's notebook templates, shipped inside the wheel as ``builder.templates`` (package data, see pyproject.toml)."""
