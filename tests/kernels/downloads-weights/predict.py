"""As timm.create_model(..., pretrained=True) does: fetch the weights from the Hugging Face hub."""

import urllib.request

URL = "https://huggingface.co/timm/resnet18.a1_in1k/resolve/main/model.safetensors"

if __name__ == "__main__":
    with urllib.request.urlopen(URL, timeout=10) as response:
        weights = response.read()
    raise SystemExit("unreachable: the download above must fail offline")
