"""Point kagglesdk at ``$KKB_KAGGLE_API`` (kkb's local Kaggle shim; see ``builder/local_kaggle/shim``).

Nothing is imported eagerly: an import hook patches ``kagglesdk.kaggle_env`` right after it loads,
so Python processes that never import the Kaggle client (kernels, tools) pay nothing. The endpoint
table entry for PROD is replaced, which is the environment the ``kaggle`` CLI always uses; kagglesdk
then calls ``$KKB_KAGGLE_API/v1/<service>/<Method>``, a form the local Kaggle serves.
"""

import importlib.abc
import importlib.machinery
import os
import sys

_TARGET = "kagglesdk.kaggle_env"
_BASE = os.environ.get("KKB_KAGGLE_API", "").rstrip("/")


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        for env in (module.KaggleEnv.PROD, module.KaggleEnv.LOCAL, module.KaggleEnv.TEST):
            module._env_to_endpoint[env] = _BASE


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader)
        return spec


if _BASE and not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
