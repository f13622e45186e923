"""The competition's gateway of an evaluation-API run: which module it is, what kkb's stand-in competition reads.

What a scoring rerun needs before it starts the gateway beside the kernel (``builder.rehearse.evalapi`` runs it and
judges it; the local Kaggle's scoring reruns call it with a :class:`Gateway` read from ``competition.toml``), and
what the hidden test's stand-in replicates along (``builder.run.batch_stand_in``).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from builder.errors import DryRunError
from builder.kkb_runtime.vocabulary import SubmissionKind
from builder.project.spec import EvaluationApiSection, KernelSpec


@dataclass(frozen=True)
class Gateway:
    """The competition facts a scoring rerun needs, where no kernel spec is at hand (the local Kaggle
    reads them from competition.toml); the dry run passes the kernel's ``[evaluation_api]`` instead."""

    gateway_module: str
    gateway_paths: tuple[str, ...] = ()
    startup_limit_seconds: int = 900
    response_timeout_seconds: int | None = None
    module: str = ""


def gateway_module(section: EvaluationApiSection | Gateway) -> str:
    """``[evaluation_api] gateway_module``, else Kaggle's naming: ``<comp>_inference_server`` → ``<comp>_gateway``."""
    if section.gateway_module:
        return section.gateway_module
    if section.module.endswith("_inference_server"):
        return section.module[: -len("_inference_server")] + "_gateway"
    raise DryRunError(f"[evaluation_api] module = '{section.module}': cannot tell the competition's gateway module from it",
                      hint="set [evaluation_api] gateway_module, e.g. 'kaggle_evaluation.<comp>_gateway'")


def sandbox_env(section: EvaluationApiSection | Gateway, port: int | None = None) -> dict[str, str]:
    """Variables kkb's stand-in competition reads (a real competition's package ignores them)."""
    env = {"KKB_EVALAPI_STARTUP_LIMIT_SECONDS": str(section.startup_limit_seconds)}
    if section.response_timeout_seconds:
        env["KKB_EVALAPI_RESPONSE_TIMEOUT_SECONDS"] = str(section.response_timeout_seconds)
    if port is not None:
        env["KKB_EVALAPI_PORT"] = str(port)
    return env


def free_port() -> int:
    """A loopback port nobody listens on now; where the sandbox shares the host's network, it keeps
    parallel dry runs apart."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def evaluation_section(spec: KernelSpec) -> EvaluationApiSection:
    """The kernel's ``[evaluation_api]``, refused for a kernel of another submission kind."""
    if spec.submission.kind is not SubmissionKind.EVALUATION_API or spec.evaluation_api is None:
        raise DryRunError("not an evaluation-API kernel", hint="set [submission] kind = 'evaluation-api' and [evaluation_api]")
    return spec.evaluation_api
