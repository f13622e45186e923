"""Stage 2, the notebook: the one strict Jinja environment and the cells of each submission kind.

Reads the project (``builder.project``); never bundles, runs or pushes anything.
"""
