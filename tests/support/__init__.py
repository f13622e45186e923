"""The test suite's shared code: fakes, fixtures, helpers, one module per subject.

Test modules import helpers from here (``from tests.support.files import KERNELS``) and never from one
another. Fixtures and hooks live in the modules that ``tests/conftest.py`` names in ``pytest_plugins``:
a test asks for a fixture by its parameter name, nothing imports a fixture.

- ``files``: repository paths and ``build_file_tree`` for tmp_path file trees.
- ``isolation``: the autouse fixture that keeps every test away from real credentials, HOME and TMPDIR.
- ``golden``: ``--update-golden`` and the normalisation golden notebooks are compared under.
- ``network``: no sockets by default; the ``loopback`` marker lets a test talk to 127.0.0.1/::1 only.
- ``kernels``: changed copies of the project kernels under ``kernels/``.
- ``fake_kaggle``: ``FakeKaggle``, an in-memory Kaggle at the adapter seam (no HTTP at all).
- ``demo_kaggle``: kkb's local Kaggle as the push/submit/wheels tests use it (user kkb-demo signed in).
- ``local_kaggle``: the local Kaggle server's own tests: a fake kernel runner, tiny competitions, clients.
- ``wheels``: a hermetic pip and a local package index of tiny projects built once per session.
- ``busy``: other work on this machine (processes spinning on one CPU) for the tests of runs on a busy machine.
"""
