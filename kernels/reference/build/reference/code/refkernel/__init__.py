"""The reference kernel's own code: shipped in the code dataset, importable as ``refkernel`` in every step."""
