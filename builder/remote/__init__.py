"""Stage 4b, Kaggle itself: the adapter around the real ``kaggle`` client (the only importer of ``kaggle``), one
session with one wait/backoff policy, datasets, kernels, submissions, queries, history, the wheel helper kernel.

Built on ``builder.build``; never imports ``builder.rehearse`` (what Kaggle says is Kaggle's, not a rehearsal's).
"""
