"""Stage 1, the kernel project: ``kernel.toml`` (spec), credentials, the build-folder layout, ids and slugs.

Imports nothing of kkb but ``builder.errors``: every other stage reads the project through this package.
"""
