"""The kernel's environment as Kaggle's machine gives it: an allow-list, never this machine's variables.

Notebooks tell Kaggle from elsewhere by their variables (``KAGGLE_URL_BASE``, ``KAGGLE_KERNEL_RUN_TYPE``,
``KAGGLE_CONTAINER_NAME``): a sandbox that hands a kernel this machine's environment sends it down its off-Kaggle
branch, and leaks the host's own (``PIP_FIND_LINKS``, ``PYENV_ROOT``, a cloud SDK's, ``HF_HUB_OFFLINE``). Every
sandboxed run (the dry run's notebook or script, the evaluation-API rerun, the build's checks of user code) gets its
environment from :func:`kernel_environment`, built from four sources and nothing else:

1. **Kaggle's**: the image description's ``environment`` (``builder/data/kaggle-image.json``, or one captured by
   ``kkb image --on-kaggle``): the Dockerfile's ``ENV`` lines and the runtime's ``KAGGLE_*`` variables with their
   values, per-session secrets (proxy tokens) as inert stand-ins; the GPU image's own only on a GPU run; values under
   Kaggle's ``HOME`` (``/root``) moved to the sandbox's; the scoring rerun's ``KAGGLE_IS_COMPETITION_RERUN``.
2. **kkb's own**: the sandbox's ``HOME``, ``TMPDIR`` and caches, the network guard first on ``PYTHONPATH`` (Kaggle's
   entries after it), ``PATH`` (kkb's pip shim, the kernel's interpreter, then Kaggle's or the system's folders),
   the ``KKB_*`` variables of the run, dead proxies where no network namespace cuts the network.
3. **this machine's**, only what the kernel's interpreter (this machine's) needs to start: ``LD_LIBRARY_PATH`` after
   Kaggle's, and ``CUDA_VISIBLE_DEVICES`` on a GPU run.
4. ``--env NAME=VALUE``: the user's, last. Kaggle credentials are refused (a kernel never sees them, on Kaggle or
   here), as are the variables the sandbox itself stands on.

:meth:`KernelEnvironment.listing` is what the report shows, secrets' values redacted. Depends on ``builder.project``
only, so that any stage that starts a sandboxed process can call it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from builder.errors import DryRunError
from builder.project.image import KaggleImage, load_image

# Never given to a kernel: the user's Kaggle credentials (a kernel on Kaggle has none either).
CREDENTIAL_VARIABLES = ("KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_API_TOKEN")
# A name that says its value is a secret: shown redacted in the report.
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|_KEY$", re.IGNORECASE)
RERUN_VARIABLE = "KAGGLE_IS_COMPETITION_RERUN"
KAGGLE_HOME = "/root"  # Kaggle's kernels run as root: its HOME, and paths under it, are the sandbox's home here
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEAD_PROXY = "http://127.0.0.1:9"  # port 9 (discard) on loopback: a proxied request fails at once
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "FTP_PROXY")
# What the kernel's interpreter, this machine's, may need from this machine to start, and why.
MACHINE_KEPT = {"LD_LIBRARY_PATH": "the kernel's interpreter is this machine's and may load libraries from there"}
MACHINE_KEPT_GPU = {"CUDA_VISIBLE_DEVICES": "which of this machine's GPUs the run may use"}
REDACTED = "<redacted>"
NAMED_FIRST = ("KAGGLE_URL_BASE", "KAGGLE_KERNEL_RUN_TYPE", "KAGGLE_IS_COMPETITION_RERUN", "KKB_KAGGLE_ROOT", "HOME")


class Origin(StrEnum):
    """Where a variable of the kernel's environment comes from (the report groups by it)."""

    KAGGLE = "Kaggle"
    KKB = "kkb"
    MACHINE = "this machine"
    USER = "--env"


@dataclass(frozen=True)
class SandboxDirs:
    """kkb's side of a sandbox root (``<root>/.sandbox``): the kernel's HOME, TMPDIR, the guard, kkb's records."""

    private: Path

    @property
    def home(self) -> Path:
        return self.private / "home"

    @property
    def tmp(self) -> Path:
        return self.private / "tmp"

    @property
    def site(self) -> Path:  # the network guard (sitecustomize.py), first on PYTHONPATH
        return self.private / "site"

    @property
    def bin(self) -> Path:  # kkb's pip shim, first on PATH
        return self.private / "bin"

    @property
    def imports(self) -> Path:
        return self.private / "imports"

    @property
    def network_log(self) -> Path:
        return self.private / "network.log"

    @property
    def image_packages(self) -> Path:
        return self.private / "image-packages.json"


@dataclass(frozen=True)
class EnvRequest:
    """What a sandboxed run needs to know to build its kernel's environment."""

    root: Path  # the sandbox root: $KKB_KAGGLE_ROOT
    dirs: SandboxDirs
    python: Path  # the kernel's interpreter (first on PATH)
    rerun: bool  # the scoring rerun: KAGGLE_IS_COMPETITION_RERUN is set
    gpu: bool = False  # the GPU image's variables (CUDA's paths), this machine's CUDA_VISIBLE_DEVICES
    proxies: bool = False  # dead HTTP(S) proxies for non-Python clients, where no network namespace cuts the network
    kkb: Mapping[str, str] = field(default_factory=dict)  # the run's own KKB_* settings (timing probe, gateway ports)
    user: Mapping[str, str] = field(default_factory=dict)  # --env NAME=VALUE
    image: KaggleImage | None = None  # default: builder.project.image.load_image()


@dataclass(frozen=True)
class GivenVariable:
    """One variable the kernel got, where it came from, and (for Kaggle's) what its value stands for."""

    name: str
    value: str
    origin: Origin
    note: str = ""

    @property
    def shown(self) -> str:
        """The value as the report shows it: a secret's redacted (a Kaggle stand-in is inert, and shown)."""
        if self.origin in (Origin.USER, Origin.MACHINE) and SECRET_NAME.search(self.name):
            return REDACTED
        return self.value

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "value": self.shown, "origin": self.origin.value, **({"note": self.note} if self.note else {})}


@dataclass(frozen=True)
class KernelEnvironment:
    """The kernel's environment, each variable with its origin (the last source to set a name wins)."""

    given: tuple[GivenVariable, ...]

    @property
    def env(self) -> dict[str, str]:
        return {variable.name: variable.value for variable in self.given}

    def listing(self) -> list[dict[str, str]]:
        """``report.json``'s list: every variable by name, value (secrets redacted), origin and what it stands for."""
        return [variable.to_json() for variable in sorted(self.given, key=lambda v: (list(Origin).index(v.origin), v.name))]

    def summary(self) -> str:
        """One line for people: how many from each source, Kaggle's stand-ins and this machine's named."""
        parts = []
        for origin in Origin:
            # what code reads to tell Kaggle first (KAGGLE_URL_BASE, KAGGLE_KERNEL_RUN_TYPE), stand-ins last
            names = [v.name for v in sorted((v for v in self.given if v.origin is origin), key=_shown_first)]
            if not names:
                continue
            shown = ", ".join(names) if origin in (Origin.MACHINE, Origin.USER) else ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
            stand_ins = sum(1 for v in self.given if v.origin is origin and v.note.startswith("stand-in"))
            parts.append(f"{origin.value} {len(names)} ({shown}" + (f"; {stand_ins} inert stand-ins" if stand_ins else "") + ")")
        return "; ".join(parts) + "; nothing else of this machine's"


def _shown_first(variable: GivenVariable) -> tuple[bool, bool, bool, str]:
    if variable.origin in (Origin.MACHINE, Origin.USER):
        return False, False, False, variable.name
    return (variable.note.startswith("stand-in"), variable.name not in NAMED_FIRST, not variable.name.startswith("KAGGLE_"),
            variable.name)


def kernel_environment(request: EnvRequest) -> KernelEnvironment:
    """The kernel's environment for one sandboxed run (see the module docstring); refuses credentials in ``--env``."""
    refuse_credentials(request.kkb)
    check_user_env(request.user)
    given: dict[str, GivenVariable] = {}
    for variable in _kaggle(request):
        given[variable.name] = variable
    for name, value in _kkb(request, given).items():
        given[name] = GivenVariable(name, value, Origin.KKB)
    for name, value in _machine(request, given).items():
        given[name] = GivenVariable(name, value, Origin.MACHINE, MACHINE_KEPT.get(name) or MACHINE_KEPT_GPU.get(name, ""))
    for name, value in request.kkb.items():
        given[name] = GivenVariable(name, str(value), Origin.KKB)
    for name, value in request.user.items():
        given[name] = GivenVariable(name, str(value), Origin.USER)
    return KernelEnvironment(tuple(given.values()))


def _kaggle(request: EnvRequest) -> list[GivenVariable]:
    image = request.image or load_image()
    accelerator = "gpu" if request.gpu else "cpu"
    home = str(request.dirs.home)
    found = []
    for variable in image.environment:
        if variable.accelerator not in (None, accelerator):
            continue
        value = variable.value
        if value == KAGGLE_HOME or value.startswith(KAGGLE_HOME + "/"):
            value = home + value[len(KAGGLE_HOME):]
        note = ("stand-in (per session on Kaggle): " if variable.stand_in else "") + variable.source
        found.append(GivenVariable(variable.name, value, Origin.KAGGLE, note))
    if request.rerun:  # Kaggle's code tests presence; the value is a guess
        found.append(GivenVariable(RERUN_VARIABLE, "1", Origin.KAGGLE, "Kaggle's runtime, in the scoring rerun only"))
    return found


def _kkb(request: EnvRequest, kaggle: Mapping[str, GivenVariable]) -> dict[str, str]:
    dirs = request.dirs
    kaggle_path = kaggle["PATH"].value if "PATH" in kaggle else SYSTEM_PATH
    kaggle_pythonpath = kaggle["PYTHONPATH"].value if "PYTHONPATH" in kaggle else ""
    env = {
        "KKB_KAGGLE_ROOT": str(request.root),
        "HOME": str(dirs.home),
        "KAGGLE_CONFIG_DIR": str(dirs.home / ".kaggle"),  # the kaggle client finds no credentials there
        "TMPDIR": str(dirs.tmp), "TMP": str(dirs.tmp), "TEMP": str(dirs.tmp),
        "XDG_CACHE_HOME": str(dirs.home / ".cache"),
        "XDG_CONFIG_HOME": str(dirs.home / ".config"),
        "XDG_DATA_HOME": str(dirs.home / ".local" / "share"),
        "JUPYTER_RUNTIME_DIR": str(dirs.home / ".jupyter-runtime"),
        # the network guard first; Kaggle's entries (an empty one: the working folder) after it
        "PYTHONPATH": str(dirs.site) + (os.pathsep + kaggle_pythonpath if kaggle_pythonpath else ""),
        "KKB_SANDBOX_NETLOG": str(dirs.network_log),
        # The kernel's `python` and `pip` are its interpreter's, as on Kaggle they are the image's; `pip` through kkb's
        # shim, which knows what the image already has (builder.run.pip_shim).
        "PATH": os.pathsep.join([str(dirs.bin), str(Path(request.python).parent), kaggle_path]),
        "KKB_IMAGE_PACKAGES": str(dirs.image_packages),
        "KKB_SANDBOX_IMPORTS": str(dirs.imports),  # what each process imported (builder.run.skew)
    }
    if request.proxies:
        for name in PROXY_VARIABLES:
            env[name] = env[name.lower()] = DEAD_PROXY
        env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"
        env["KKB_SANDBOX_DEAD_PROXY"] = DEAD_PROXY
    return env


def _machine(request: EnvRequest, given: Mapping[str, GivenVariable]) -> dict[str, str]:
    kept = {**MACHINE_KEPT, **(MACHINE_KEPT_GPU if request.gpu else {})}
    found = {}
    for name in kept:
        value = os.environ.get(name)
        if value:
            before = given[name].value if name in given else ""
            found[name] = os.pathsep.join(filter(None, [before, value])) if name == "LD_LIBRARY_PATH" else value
    return found


# The variables a sandboxed process stands on: --env cannot replace them.
SANDBOX_OWNED = ("HOME", "TMPDIR", "PATH", "PYTHONPATH", "KAGGLE_CONFIG_DIR", RERUN_VARIABLE)


def refuse_credentials(names: Mapping[str, str]) -> None:
    refused = sorted(name for name in names if name in CREDENTIAL_VARIABLES)
    if refused:
        raise DryRunError(f"refusing to pass {', '.join(refused)} into the sandbox",
                          hint="kernels never see Kaggle credentials, on Kaggle or here")


def check_user_env(user: Mapping[str, str]) -> None:
    """``--env``: a credential never enters a kernel; the sandbox's own variables and ``KKB_*`` are kkb's."""
    refuse_credentials(user)
    owned = sorted(name for name in user if name in SANDBOX_OWNED or name.startswith("KKB_"))
    if owned:
        raise DryRunError(f"--env {owned[0]}: the sandbox sets {owned[0]} itself",
                          hint="the scenario sets KAGGLE_IS_COMPETITION_RERUN (--scenario rerun); HOME, TMPDIR, PATH, "
                               "PYTHONPATH and KKB_* belong to the sandbox; pass any other variable")


def parse_env_options(options: Sequence[str]) -> dict[str, str]:
    """``--env NAME=VALUE`` options (repeatable) as a mapping; a malformed one is refused naming it."""
    parsed: dict[str, str] = {}
    for option in options:
        name, separator, value = option.partition("=")
        if not separator or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise DryRunError(f"--env {option!r}: expected NAME=VALUE", hint="e.g. --env MY_FLAG=1 (repeat --env for more)")
        parsed[name] = value
    check_user_env(parsed)
    return parsed
