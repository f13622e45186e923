"""Every error kkb raises on purpose, with the hint that tells the user what to do next.

The library raises these; only ``builder.cli`` turns them into a message and an exit code:

====  =================================================================================
code  meaning
====  =================================================================================
0     success
1     user or configuration error (spec, paths, a credential in the bundle, ...)
2     the kernel failed: a dry-run verdict other than OK, a kernel run in ERROR, a
      submission that Kaggle (or the local Kaggle) refused or could not score
3     remote API error (HTTP status, refused request, timeout while waiting)
4     authentication error
5     not rehearsed: the dry run could not tell what Kaggle would do (a package Kaggle's image has and
      this environment lacks, CUDA on a machine without a GPU); nothing failed that Kaggle would fail
64    usage error: an unknown command or option, a missing argument (click's own 2 is
      moved here so that it never reads as "the kernel failed")
130   interrupted (Ctrl-C)
====  =================================================================================
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_USER = 1
EXIT_KERNEL = 2
EXIT_REMOTE = 3
EXIT_AUTH = 4
EXIT_NOT_REHEARSED = 5
EXIT_USAGE = 64  # sysexits.h EX_USAGE
EXIT_INTERRUPTED = 130


class KkbError(Exception):
    """Base of every error kkb raises on purpose.

    ``message`` says what is wrong (naming the file and key where there is one), ``hint`` says
    how to fix it. Both are shown to people verbatim, so neither may contain a secret.
    """

    exit_code = EXIT_USER

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class SpecError(KkbError):
    """``kernel.toml`` is missing, unreadable or invalid."""


class BundleError(KkbError):
    """A file selection cannot be bundled (missing file, escaping path, credential)."""


class TemplateError(KkbError):
    """A notebook template is missing, broken, or uses an undefined variable."""


class ModelError(KkbError):
    """A model card or checkpoint cannot be rebuilt offline (mismatched keys, unknown arch)."""


class DryRunError(KkbError):
    """The local rehearsal could not run at all (not: the kernel failed; that is a verdict)."""


class KernelFailed(KkbError):
    """The kernel ran and failed: a verdict other than OK, or a submission error."""

    exit_code = EXIT_KERNEL


class NotRehearsed(KkbError):
    """The dry run could not rehearse a step here; Kaggle's verdict is unknown, not a failure."""

    exit_code = EXIT_NOT_REHEARSED


class RemoteError(KkbError):
    """Kaggle (or a Kaggle-compatible server) refused a request or did not answer in time."""

    exit_code = EXIT_REMOTE


class LimitReached(RemoteError):
    """Kaggle's limits stop the run before anything is uploaded: no submission left today, GPU quota, the session
    cap, a version of the kernel still running (exit 3, as Kaggle's own refusal would be)."""


class SessionCapReached(LimitReached):
    """Kaggle refused a GPU push: the account's GPU sessions are at their cap."""


class InputsDiffer(RemoteError):
    """The run read other inputs than kkb pushed: Kaggle mounted another version (a dropped pin)."""


class AuthError(RemoteError):
    """No usable Kaggle credentials, or the server rejected them."""

    exit_code = EXIT_AUTH


class LocalKaggleError(KkbError):
    """The local Kaggle cannot start, or a competition folder or its data directory is invalid."""


class WheelhouseError(KkbError):
    """An offline dependency cannot be resolved, built or installed."""


class StaleWheelhouse(WheelhouseError):
    """Kaggle's image moved (Python ABI, CUDA, torch) since the wheelhouse was built: what it holds no longer fits."""


class LockedError(KkbError):
    """Another kkb command holds the kernel project's lock (exit 1: nothing was done)."""
