from builder.cli import entrypoint

entrypoint()
