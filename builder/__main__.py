"""``python -m builder`` and the ``kkb`` command: the CLI, imported with the garbage collector paused.

Importing the CLI creates a few hundred thousand objects (pydantic, jupyter_client, nbformat, rich), none of
them garbage, and the collector's passes over them cost 0.2-0.3 s of every command's start. The collector is
paused while they are created, the survivors are frozen (later collections skip them) and it runs again
before any command does. Only this entry point does it: importing ``builder`` as a library changes nothing.
"""

from __future__ import annotations

import gc

gc.disable()
try:
    from builder.cli import entrypoint  # inside the pause
finally:
    gc.freeze()
    gc.enable()

if __name__ == "__main__":
    entrypoint()
