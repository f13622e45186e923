"""The local Kaggle never writes outside its data folder: every name in a request passes ``names.py``.

Two tables: the checks themselves (exact messages), and each request that carries a name, sent raw
with a hostile one; each must be answered 400 with that message and leave the disk outside the data
folder untouched.
"""

from __future__ import annotations

import base64
import io
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
import requests

from builder.local_kaggle import names
from builder.local_kaggle.wire import ApiError
from tests.support.local_kaggle import KEY, USER, make_competition, start_server

pytestmark = pytest.mark.loopback  # a local Kaggle over loopback HTTP

AUTH = {"Authorization": "Basic " + base64.b64encode(f"{USER}:{KEY}".encode()).decode()}


# -- the checks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        (lambda v: names.file_name(v, "blob name"), "..", "Invalid blob name '..': '.' and '..' are not names"),
        (lambda v: names.file_name(v, "blob name"), ".", "Invalid blob name '.': '.' and '..' are not names"),
        (lambda v: names.file_name(v, "blob name"), "", "Invalid blob name '': an empty name"),
        (lambda v: names.file_name(v, "directory name"), "../../x",
         "Invalid directory name '../../x': a name cannot contain '/' or '\\'"),
        (lambda v: names.file_name(v, "directory name"), "a\\b",
         "Invalid directory name 'a\\\\b': a name cannot contain '/' or '\\'"),
        (lambda v: names.file_name(v, "file name"), "a\nb", "Invalid file name 'a\\nb': a name cannot contain control characters"),
        (lambda v: names.file_name(v, "file name"), "a\x00b", "Invalid file name 'a\\x00b': a name cannot contain control characters"),
        (lambda v: names.file_name(v, "file name"), "x" * 256, f"Invalid file name '{'x' * 256}': longer than 255 bytes"),
        (lambda v: names.relative_path(v, "file name"), "/etc/passwd", "Invalid file name '/etc/passwd': an absolute path"),
        (lambda v: names.relative_path(v, "file name"), "a/../../b", "Invalid file name 'a/../../b': '.' and '..' are not names"),
        (lambda v: names.relative_path(v, "file name"), "a//b", "Invalid file name 'a//b': an empty name"),
        (lambda v: names.relative_path(v, "archive entry", archive="w.zip"), "..\\..\\x",
         "Invalid archive entry '..\\\\..\\\\x' in w.zip: '.' and '..' are not names"),
        (lambda v: names.relative_path(v, "archive entry", archive="w.zip"), "C:/x",
         "Invalid archive entry 'C:/x' in w.zip: an absolute path"),
        (lambda v: names.relative_path(v, "archive entry", archive="w.tar"), "./.",
         "Invalid archive entry './.' in w.tar: an empty path"),
        (lambda v: names.relative_path(v, "file name"), "/".join("d" * 33),
         f"Invalid file name '{'/'.join('d' * 33)}': more than 32 levels deep"),
        (lambda v: names.slug(v, "dataset slug"), "../x",
         "Invalid dataset slug '../x': use lower-case letters, digits and '-' (not at the start or end), "
         "at most 100 characters"),
        (lambda v: names.slug(v, "owner"), "-x", "Invalid owner '-x': use lower-case letters, digits and '-' "
                                                 "(not at the start or end), at most 100 characters"),
    ],
    ids=["dotdot", "dot", "empty", "slashes", "backslash", "newline", "nul", "too-long", "absolute", "climbing",
         "empty-segment", "archive-backslash-climb", "archive-drive", "archive-empty", "too-deep", "slug-climb",
         "slug-dash"],
)
def test_a_bad_name_is_refused_with_a_400_that_says_why(check: Any, value: str, message: str) -> None:
    with pytest.raises(ApiError) as refused:
        check(value)
    assert (refused.value.status, refused.value.message) == (400, message)


@pytest.mark.parametrize(
    ("value", "archive", "clean"),
    [("a/b.csv", None, "a/b.csv"), ("./a/./b.csv", "x.tar", "a/b.csv"), ("dir\\f.txt", "x.zip", "dir/f.txt"),
     (".hidden", None, ".hidden"), ("ünïcode.csv", None, "ünïcode.csv")],
)
def test_good_paths_pass_clean(value: str, archive: str | None, clean: str) -> None:
    assert names.relative_path(value, "file name", archive=archive) == clean


def test_inside_refuses_a_symlink_out_of_its_folder(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "link").symlink_to(tmp_path)
    with pytest.raises(ApiError, match="Invalid file name 'link/x': it leads outside its folder"):
        names.inside(tmp_path / "root", "link/x", "file name")
    assert names.inside(tmp_path / "root", "y", "file name") == (tmp_path / "root" / "y").resolve()


# -- every request that carries a name -------------------------------------------------------


def _zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _tar(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tf:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class Wire:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def rpc(self, method: str, body: dict[str, Any]) -> requests.Response:
        return requests.post(f"{self.base_url}/api/v1/{method}", json=body, headers=AUTH, timeout=30)

    def upload(self, name: str, data: bytes) -> str:
        start = self.rpc("blobs.BlobApiService/StartBlobUpload", {"type": "DATASET", "name": name,
                                                                  "contentLength": len(data)})
        assert start.status_code == 200, start.text
        assert requests.put(start.json()["createUrl"], data=data, timeout=30).status_code == 200
        return start.json()["token"]

    def create(self, files: list[str] = (), directories: list[dict[str, Any]] = ()) -> requests.Response:  # type: ignore[assignment]
        return self.rpc("datasets.DatasetApiService/CreateDataset", {
            "ownerSlug": USER, "slug": "name-checks", "title": "Name checks", "licenseName": "CC0-1.0",
            "files": [{"token": t} for t in files], "directories": list(directories)})


def _blob_name(wire: Wire, value: str) -> requests.Response:
    return wire.rpc("blobs.BlobApiService/StartBlobUpload", {"type": "DATASET", "name": value, "contentLength": 1})


def _directory(wire: Wire, value: str) -> requests.Response:
    return wire.create(directories=[{"name": value, "files": [{"token": wire.upload("x.csv", b"x")}]}])


def _nested_directory(wire: Wire, value: str) -> requests.Response:
    inner = {"name": value, "files": [{"token": wire.upload("x.csv", b"x")}]}
    return wire.create(directories=[{"name": "fine", "directories": [inner]}])


def _zip_entry(wire: Wire, value: str) -> requests.Response:
    return wire.create(files=[wire.upload("w.zip", _zip({value: b"x"}))])


def _tar_entry(wire: Wire, value: str) -> requests.Response:
    return wire.create(files=[wire.upload("w.tar", _tar({value: b"x"}))])


def _archive_folder(wire: Wire, value: str) -> requests.Response:
    return wire.create(files=[wire.upload(value, _zip({"a.txt": b"x"}))])


def _dataset_download(wire: Wire, value: str) -> requests.Response:
    assert wire.create(files=[wire.upload("x.csv", b"x")]).json()["status"] == "ok"
    return wire.rpc("datasets.DatasetApiService/DownloadDataset",
                    {"ownerSlug": USER, "datasetSlug": "name-checks", "fileName": value})


def _competition_download(wire: Wire, value: str) -> requests.Response:
    return wire.rpc("competitions.CompetitionApiService/DownloadDataFile",
                    {"competitionName": "tiny-parity", "fileName": value})


def _submission_upload(wire: Wire, value: str) -> requests.Response:
    return wire.rpc("competitions.CompetitionApiService/StartSubmissionUpload",
                    {"competitionName": "tiny-parity", "fileName": value, "contentLength": 1})


def _code_submission(wire: Wire, value: str) -> requests.Response:
    return wire.rpc("competitions.CompetitionApiService/CreateCodeSubmission",
                    {"competitionName": "tiny-parity", "kernelOwner": USER, "kernelSlug": "k", "fileName": value})


@pytest.mark.parametrize(
    ("send", "value", "message"),
    [
        (_blob_name, "../x.bin", "Invalid blob name '../x.bin': a name cannot contain '/' or '\\'"),
        (_blob_name, "..", "Invalid blob name '..': '.' and '..' are not names"),
        (_directory, "../../escape", "Invalid directory name '../../escape': a name cannot contain '/' or '\\'"),
        (_directory, "..", "Invalid directory name '..': '.' and '..' are not names"),
        (_nested_directory, "..", "Invalid directory name '..': '.' and '..' are not names"),
        (_zip_entry, "../../escape.txt", "Invalid archive entry '../../escape.txt' in w.zip: '.' and '..' are not names"),
        (_zip_entry, "..\\..\\escape.txt",
         "Invalid archive entry '..\\\\..\\\\escape.txt' in w.zip: '.' and '..' are not names"),
        (_tar_entry, "/tmp/escape.txt", "Invalid archive entry '/tmp/escape.txt' in w.tar: an absolute path"),
        (_archive_folder, "...zip",
         "Invalid folder name (the archive's name without its suffix) '..': '.' and '..' are not names"),
        (_dataset_download, "../../../users.json",
         "Invalid file name '../../../users.json': '.' and '..' are not names"),
        (_competition_download, "../answers.csv", "Invalid file name '../answers.csv': '.' and '..' are not names"),
        (_submission_upload, "../x.csv", "Invalid submission file name '../x.csv': a name cannot contain '/' or '\\'"),
        (_code_submission, "../../x.csv", "Invalid output file name '../../x.csv': '.' and '..' are not names"),
    ],
    ids=["blob-climb", "blob-dotdot", "directory-climb", "directory-dotdot", "nested-directory", "zip-slip",
         "zip-backslash", "tar-absolute", "archive-folder", "dataset-download", "competition-download",
         "submission-upload", "code-submission"],
)
def test_every_name_in_a_request_is_checked(tmp_path: Path, send: Any, value: str, message: str) -> None:
    data = tmp_path / "deep" / "down" / "kaggle-data"
    with start_server(data) as server:
        server.add_competition(make_competition(tmp_path / "competition"))
        before = _outside(tmp_path, data)
        answer = send(Wire(server.base_url), value)
        assert (answer.status_code, answer.json()) == (400, {"code": 400, "message": message})
        assert _outside(tmp_path, data) == before
        assert not list(data.glob("datasets/*/*/versions/*/files/**/escape*"))


def _outside(root: Path, data: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if data not in p.parents and p != data)


def test_a_name_that_is_no_slug_is_not_found_and_never_a_path(tmp_path: Path) -> None:
    with start_server(tmp_path / "data") as server:
        wire = Wire(server.base_url)
        answer = wire.rpc("datasets.DatasetApiService/GetDatasetStatus", {"ownerSlug": "..", "datasetSlug": ".."})
        assert (answer.status_code, answer.json()["message"]) == (404, "Dataset ../.. not found")
        answer = wire.rpc("competitions.CompetitionApiService/GetCompetition", {"competitionName": "../kernels"})
        assert (answer.status_code, answer.json()["message"]) == (404, "Competition '../kernels' not found")
