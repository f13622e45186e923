"""The ranzcr-style example's own code: shipped in the code dataset, importable as ``clipkernel``."""
