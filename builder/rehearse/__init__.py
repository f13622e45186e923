"""Stage 4a, the dry run: the Kaggle-like sandbox, the notebook executor, Kaggle's verdicts, the scenarios of
each submission kind, and the guests (``guest/``) that run *inside* the sandbox.

Built on ``builder.build``; never imports ``builder.remote`` (a rehearsal talks to no Kaggle).
"""
