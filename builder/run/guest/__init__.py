"""Files that run *inside* the dry-run sandbox, not in kkb: standard library only, never import ``builder``.

- ``sitecustomize.py`` is copied onto the kernel's ``PYTHONPATH`` and turns the internet off for every
  Python process of the run (the kernel and its steps).
- ``launch.py`` starts the kernel in its own network and mount namespaces where the OS allows it.
"""
