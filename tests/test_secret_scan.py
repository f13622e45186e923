"""Keys in every container kkb ships are refused at build, naming the file and the member, never the key.

One table of containers (a text file, zip, npz with a str array, compressed npz, npy, a pickled object
array, tar in every compression, parquet and feather metadata, a safetensors header, a pickle, a
compressed joblib) times one table of keys (Kaggle legacy key and ``KGAT_`` token, AWS access key,
GitHub and Hugging Face tokens, the value of a credential in the environment). Every key here is made
up for the test.
"""

from __future__ import annotations

import io
import json
import pickle
import shutil
import struct
import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from builder.build import BuildSettings, build_kernel
from builder.bundle import files as files_module
from builder.bundle import secret_scan
from builder.bundle.secret_scan import find_key, npy_text
from builder.errors import BundleError
from builder.project.credentials import Secret, environment_credentials, secret_values
from tests.support.files import KERNELS
from tests.test_archive_secrets import _with_weight, _zip

# Made-up keys of each kind (the shapes of real ones, no real value).
KEYS = {
    "kaggle-legacy": ('{"username": "someone", "key": "0123456789abcdef0123456789abcdef"}', "holds a Kaggle API key"),
    "kaggle-kgat": ("KGAT_0123456789abcdef0123456789abcdef", "holds a Kaggle API token (KGAT_…)"),
    "aws": ("AKIAABCDEFGHIJKLMNOP", "holds an AWS access key"),
    "github": ("ghp_" + "A1b2C3d4E5" * 3 + "F6g7H8", "holds a GitHub token"),
    "huggingface": ("hf_" + "AbCdEfGhIj" * 3 + "KlMn", "holds a Hugging Face token"),
    "environment": ("plain-looking-value-9f8e7d6c5b4a", "holds the value of $MY_SERVICE_TOKEN"),
}


def _tar(name: str, data: bytes, mode: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as bundle:  # type: ignore[call-overload]
        info = tarfile.TarInfo(name)
        info.size = len(data)
        bundle.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def _npz(key: str, compressed: bool) -> bytes:
    buffer = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buffer, names=np.array(["a", f"x {key} y", "b"]))
    return buffer.getvalue()


def _parquet(key: str) -> bytes:
    pa = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"x": [1, 2]}).replace_schema_metadata({"notes": key})
    buffer = io.BytesIO()
    parquet.write_table(table, buffer, compression="snappy")
    return buffer.getvalue()


def _feather(key: str) -> bytes:
    pa = pytest.importorskip("pyarrow")
    feather = pytest.importorskip("pyarrow.feather")
    buffer = io.BytesIO()
    feather.write_feather(pa.table({"x": [1, 2]}).replace_schema_metadata({"notes": key}), buffer, compression="zstd")
    return buffer.getvalue()


def _safetensors(key: str) -> bytes:
    header = json.dumps({"__metadata__": {"notes": key}, "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    return struct.pack("<Q", len(header)) + header + b"\x00" * 4


def _joblib(key: str) -> bytes:
    joblib = pytest.importorskip("joblib")
    buffer = io.BytesIO()
    joblib.dump({"weights": [0.5] * 10, "config": {"token": key}}, buffer, compress=("zlib", 3))
    return buffer.getvalue()


# name in weights/, how it is made from the key, where the message says the key is
CONTAINERS: list[tuple[str, Callable[[str], bytes], str]] = [
    ("notes.txt", lambda key: f"saved with {key}\n".encode(), "weights/notes.txt:"),
    ("logs.zip", lambda key: _zip({"run/stdout.txt": f"token {key}\n".encode()}), "weights/logs.zip: member run/stdout.txt"),
    ("arrays.npz", lambda key: _npz(key, False), "weights/arrays.npz: member names.npy"),
    ("packed.npz", lambda key: _npz(key, True), "weights/packed.npz: member names.npy"),
    ("names.npy", lambda key: _npy(np.array([f"x {key}"])), "weights/names.npy:"),
    ("objects.npy", lambda key: _npy(np.array([{"k": key}, None], dtype=object)), "weights/objects.npy:"),
    ("backup.tar", lambda key: _tar("cfg.txt", key.encode(), "w"), "weights/backup.tar: member cfg.txt"),
    ("backup.tar.gz", lambda key: _tar("cfg.txt", key.encode(), "w:gz"), "weights/backup.tar.gz: member cfg.txt"),
    ("backup.tar.bz2", lambda key: _tar("cfg.txt", key.encode(), "w:bz2"), "weights/backup.tar.bz2: member cfg.txt"),
    ("backup.tar.xz", lambda key: _tar("cfg.txt", key.encode(), "w:xz"), "weights/backup.tar.xz: member cfg.txt"),
    ("table.parquet", _parquet, "weights/table.parquet:"),
    ("table.feather", _feather, "weights/table.feather:"),
    ("model.safetensors", _safetensors, "weights/model.safetensors:"),
    ("model.pkl", lambda key: pickle.dumps({"config": {"token": key}, "names": np.array([key])}), "weights/model.pkl:"),
    ("model.joblib", _joblib, "weights/model.joblib:"),
]


@pytest.fixture
def minimal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no kaggle.json of the machine's
    for name in ("KAGGLE_KEY", "KAGGLE_USERNAME", "KAGGLE_API_TOKEN", "KAGGLE_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MY_SERVICE_TOKEN", KEYS["environment"][0])
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))


@pytest.mark.parametrize("kind", list(KEYS))
@pytest.mark.parametrize(("name", "make", "where"), CONTAINERS, ids=[c[0] for c in CONTAINERS])
def test_a_key_in_any_container_is_refused_at_build(minimal: Path, tmp_path: Path, kind: str, name: str,
                                                    make: Callable[[str], bytes], where: str) -> None:
    key, what = KEYS[kind]
    _with_weight(minimal, name, make(key))
    with pytest.raises(BundleError) as caught:
        build_kernel(BuildSettings(kernel_dir=minimal, out_dir=tmp_path / "out"))
    assert caught.value.message == f"{where} {what}; refusing to put it in the weights dataset"
    assert key not in str(caught.value) + (caught.value.hint or "")
    assert not (tmp_path / "out").exists()


def test_a_clean_file_of_each_container_builds(minimal: Path, tmp_path: Path) -> None:
    """No false alarm: the same containers holding ordinary text (an md5, an id, a path) build."""
    ordinary = "md5 0123456789abcdef0123456789abcdef ASIA region hf_small gh_pages /home/me/token"
    for name, make, _ in CONTAINERS:
        (minimal / "weights" / name).write_bytes(make(ordinary))
    spec = minimal / "kernel.toml"
    spec.write_text(spec.read_text().replace('include = ["weights/*.json"]', 'include = ["weights/*"]'))
    result = build_kernel(BuildSettings(kernel_dir=minimal, out_dir=tmp_path / "out"))
    assert (result.weights_dir / "weights" / "arrays.npz").is_file()


def test_a_str_array_is_decoded_and_a_pickle_never_unpickled(tmp_path: Path) -> None:
    text = npy_text(_npy(np.array(["KGAT_x", "ünïcode"])))
    assert text is not None and b"KGAT_x" in text and "ünïcode".encode() in text
    assert npy_text(_npy(np.array([1, 2]))) is None
    trap = tmp_path / "trap.pkl"  # unpickling this would create a file
    trap.write_bytes(b"\x80\x04cbuiltins\nopen\n(X" + str(tmp_path / "pwned").encode() + b"\nX\x01\x00\x00\x00w\ntR.")
    assert find_key(trap, "trap.pkl") is None and not (tmp_path / "pwned").exists()


def test_credentials_in_the_environment_are_secrets() -> None:
    env = {"HF_TOKEN": "hf_value_12345678", "AWS_SECRET_ACCESS_KEY": "abcDEF123456/xyz", "GPG_KEY": "A035C8C19219BA821ECEA86B64E628F8D684696D",
           "SSH_KEY_PATH": "/home/me/.ssh/id", "MY_API_KEY": "short", "DB_PASSWORD": "two words here", "PATH": "/usr/bin"}
    assert [secret.what for secret in environment_credentials(env)] == ["the value of $AWS_SECRET_ACCESS_KEY",
                                                                        "the value of $HF_TOKEN"]
    assert "the value of $HF_TOKEN" in [secret.what for secret in secret_values({**env, "HOME": "/nonexistent"})]
    assert Secret("x", "y").value == "y"


def test_a_large_file_is_searched_for_patterns_at_its_ends_and_for_values_all_through(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secret_scan, "CHUNK", 1024)
    monkeypatch.setattr(secret_scan, "PATTERN_LIMIT", 4096)
    token, value = KEYS["github"][0], KEYS["environment"][0]
    middle, footer = tmp_path / "middle.bin", tmp_path / "footer.bin"
    middle.write_bytes(b"\0" * 5000 + token.encode() + b"\0" * 5000)
    footer.write_bytes(b"\0" * 10000 + token.encode() + b"\0" * 100)
    assert find_key(middle, "middle.bin") is None
    assert find_key(footer, "footer.bin") == secret_scan.Finding("footer.bin:", "holds a GitHub token")
    middle.write_bytes(b"\0" * 5000 + value.encode() + b"\0" * 5000)
    assert find_key(middle, "middle.bin", [Secret("the value of $X", value)]) == secret_scan.Finding(
        "middle.bin:", "holds the value of $X", pattern=False)


def test_an_unchanged_source_is_not_read_again_and_a_change_or_a_new_secret_rescans(
        minimal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The selection's scan reads a content once per digest (patterns + secrets in use); edits and new keys rescan."""
    _with_weight(minimal, "table.npy", _npy(np.array(["an ordinary row"])))
    read: list[str] = []
    scan = secret_scan.find_key  # what files.py calls, until patched there
    def counted(path: Path, relative: str, *args: object, **kwargs: bool) -> object:
        if kwargs.get("patterns", True):  # the selection's scan (the staged datasets are read for values only)
            read.append(relative)
        return scan(path, relative, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(files_module, "find_key", counted)
    settings = BuildSettings(kernel_dir=minimal, out_dir=tmp_path / "out")
    for _ in range(3):  # the first build learns the hashes, the second records the clean scan, the third reads nothing
        read.clear()
        build_kernel(settings)
    assert "weights/table.npy" not in read and read == []
    (minimal / "weights" / "table.npy").write_bytes(_npy(np.array([KEYS["github"][0]])))
    with pytest.raises(BundleError, match="weights/table.npy"):
        build_kernel(settings)
    (minimal / "weights" / "table.npy").write_bytes(_npy(np.array(["an ordinary row again"])))
    build_kernel(settings)
    build_kernel(settings)
    monkeypatch.setenv("ANOTHER_SERVICE_TOKEN", "a-value-no-file-has-1234567890")  # a new secret: everything again
    read.clear()
    build_kernel(settings)
    assert "weights/table.npy" in read
