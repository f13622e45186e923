"""The kkb-evalapi competition's inference server: wrap your ``predict(test_batch)`` in it.

    import os
    import kaggle_evaluation.kkb_evalapi_inference_server as ke

    server = ke.KkbEvalapiInferenceServer(predict)
    if os.getenv("KAGGLE_IS_COMPETITION_RERUN"):
        server.serve()
    else:
        server.run_local_gateway(("/kaggle/input/kkb-evalapi/test.csv",))
"""

from __future__ import annotations

from typing import Any

from kaggle_evaluation import kkb_evalapi_gateway
from kaggle_evaluation.core import templates


class KkbEvalapiInferenceServer(templates.InferenceServer):
    def _get_gateway_for_test(self, data_paths: tuple[str, ...] | None = None, file_share_dir: str | None = None,
                              *args: Any, **kwargs: Any) -> kkb_evalapi_gateway.KkbEvalapiGateway:
        return kkb_evalapi_gateway.KkbEvalapiGateway(data_paths)
