"""Image cards: the test images (``predict``), their pipelines (``transforms``) and test-time augmentation (``tta``)."""
