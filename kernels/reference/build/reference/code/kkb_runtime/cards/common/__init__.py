"""What every card kind's runner shares: the device (``device``), checkpoints and folds (``checkpoints``), the
network's loading and its activation (``models``), and the test table, the step's columns and where the inputs are
(``tables``). No kind imports another kind's module: what two kinds share lives here."""
