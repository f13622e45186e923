"""my-inference.ipynb as a kkb step, written by `kkb init --from` (code cells in order)."""

import pandas as pd
import timm

model = timm.create_model('resnet18', pretrained=False, num_classes=1)
weights = '/kaggle/input/my-inference-weights/model.pth'

# kkb init: not run in a step: !pip install --no-index /kaggle/input/timm-pkg/timm.whl

sample = pd.read_csv('/kaggle/input/kkb-minimal/sample_submission.csv')
sample.to_csv('submission.csv', index=False)

# -- kkb init: a step hands its predictions to kkb as --out (the submission this code wrote) --
import shutil as _kkb_shutil  # noqa: E402
import sys as _kkb_sys  # noqa: E402

if "--out" in _kkb_sys.argv:
    _kkb_shutil.copyfile("submission.csv", _kkb_sys.argv[_kkb_sys.argv.index("--out") + 1])
