"""Running like Kaggle: the sandbox a kernel runs in, and the build's short sandboxed run of the user's code.

Between ``builder.bundle``/``builder.notebook`` and ``builder.project``: the build checks user code in the same
sandbox the dry run executes the notebook in, so both import the sandbox's primitives from here.

- ``sandbox``: a root laid out as ``/kaggle`` (inputs in the current or legacy layout, ``working/``, ``temp/``) and
  the kernel's environment; ``isolation`` and ``overlay``: bubblewrap, kkb's namespace launcher or the portable
  mode, and the root's writable layer; ``pip_shim``: the sandbox's ``pip``.
- ``guest/``: files that run *inside* the sandbox (standard library only, never ``builder``).
- ``process``: one program run in such a sandbox, bounded in time, naming the call that ran out of it; ``program``:
  one of kkb's own programs over a few read-only folders, its JSON answer read back (the metric file, card views).
- ``host_view``, ``processes``, ``shared_memory``: what the sandbox shows of this machine, its task limit, its
  ``/dev/shm`` counted in the memory; ``sandbox_files``: kkb follows no link a run made.
"""
