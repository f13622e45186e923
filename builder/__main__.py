"""``python -m builder`` and the ``kkb`` command: the CLI, imported with the garbage collector paused.

Importing the CLI creates a few hundred thousand objects (pandas, numpy, pydantic, jupyter_client), none of
them garbage, and the collector's passes over them cost 0.2-0.3 s of every command's start. The collector is
paused while they are created, the survivors are frozen (later collections skip them) and it runs again
before any command does.
"""

from __future__ import annotations

import gc


def main() -> None:
    gc.disable()
    try:
        # Imported here, not at the top: the pause must cover the import itself.
        from builder.cli import entrypoint
    finally:
        gc.freeze()
        gc.enable()
    entrypoint()


if __name__ == "__main__":
    main()
