"""Stage 4a, the dry run: the scenarios of each submission kind run through ``builder.run`` (the Kaggle-like
sandbox, the executors, memory and limits), and judged here: Kaggle's verdicts, the diagnosis of a failure, the
time projections, the metric's checks, the report.

Built on ``builder.build``; never imports ``builder.remote`` (a rehearsal talks to no Kaggle).
"""
