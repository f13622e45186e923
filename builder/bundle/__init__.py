"""Stage 2, what goes into Kaggle datasets: file selection and manifests (``files``), model checkpoints
prepared for the kernel (``models``), and the offline wheelhouse (``wheels``, ``wheelcheck``).

Reads the project (``builder.project``); knows nothing of notebooks, sandboxes or Kaggle's API.
"""
