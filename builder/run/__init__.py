"""Running like Kaggle: the sandbox a kernel runs in, and the build's short sandboxed run of the user's code.

Between ``builder.bundle``/``builder.notebook`` and ``builder.project``: the build checks user code in the same
sandbox the dry run executes the notebook in, so both import the sandbox's primitives from here. A stage of its own
rather than ``builder.rehearse.run``: import-linter's layers are flat, and a part of ``rehearse`` could not sit
below ``build``.

- ``sandbox``: a root laid out as ``/kaggle`` (inputs in the current or legacy layout, ``working/``, ``temp/``) and
  the kernel's environment; ``isolation`` and ``overlay``: bubblewrap, kkb's namespace launcher or the portable
  mode, and the root's writable layer; ``pip_shim``: the sandbox's ``pip``.
- ``guest/``: files that run *inside* the sandbox (standard library only, never ``builder``).
- ``process``: one program run in such a sandbox, bounded in time, naming the call that ran out of it; ``program``:
  one of kkb's own programs over a few read-only folders, its JSON answer read back (the metric file, card views).
- ``host_view``, ``processes``, ``shared_memory``: what the sandbox shows of this machine, its task limit, its
  ``/dev/shm`` counted in the memory; ``sandbox_files``: kkb follows no link a run made.
- ``execute``, ``script_run``, ``forms``: a kernel run as Kaggle runs it, one executor per kernel form (the notebook
  through nbclient, a script as ``python``); ``memory``, ``limits``, ``load``, ``deadlines``: what the run used, as
  Kaggle's container counts it, and what the machine's load took from it; ``skew``, ``env_check``, ``image_env``: the
  packages it imported against the image's, a ``kkb env`` environment of the image's versions; ``stand_ins``,
  ``batch_stand_in``, ``gateway``: the inputs and the hidden test's stand-ins it mounts, an evaluation-API gateway.

Nothing here judges a run (Kaggle's verdicts, the report, the projections are ``builder.rehearse``'s): the dry run
and the local Kaggle both run kernels through this package, and never the other way round.
"""
