"""Where the Kaggle username comes from when ``[kernel] owner`` is not set, and which secret values
the build must keep out of every bundle.

The username is read for dataset and kernel ids. The key and tokens are used only by the real
``kaggle`` client (``builder.remote.kaggle_api``); :func:`secret_values` reads them for one purpose:
the build scans what goes into each dataset for them (``bundle.files.refuse_secret_values``). They
are never shown, logged or written anywhere. A kaggle.json that is not
a JSON object is reported as such, naming the file (never its content, which holds the key).
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from builder.errors import AuthError, SpecError

KAGGLE_JSON_HINT = ('kaggle.json must hold {"username": "...", "key": "..."}: fix it, or download a new one '
                    "from kaggle.com → Settings → API → Create New Token")


def kaggle_json_candidates(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The client's own search order (kaggle-api.md §2)."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME", str(Path.home())))
    if env.get("KAGGLE_CONFIG_DIR"):
        return [Path(env["KAGGLE_CONFIG_DIR"]) / "kaggle.json"]
    xdg = Path(env.get("XDG_CONFIG_HOME", str(home / ".config")))
    return [home / ".kaggle" / "kaggle.json", xdg / "kaggle" / "kaggle.json"]


def kaggle_username(environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    if env.get("KAGGLE_USERNAME"):
        return env["KAGGLE_USERNAME"]
    for path in kaggle_json_candidates(env):
        if path.is_file():
            username = read_kaggle_json(path).get("username")
            if username:
                return str(username)
    return None


def check_kaggle_json(environ: Mapping[str, str] | None = None) -> None:
    """Refuse (:class:`AuthError`, naming it) a malformed kaggle.json among the places the client reads,
    before the client reports it as "no credentials found"."""
    for path in kaggle_json_candidates(environ):
        if path.is_file():
            read_kaggle_json(path)


def read_kaggle_json(path: Path) -> dict[str, object]:
    """A kaggle.json as a dict; :class:`AuthError` naming the file when it is unreadable or malformed."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AuthError(f"{path}: cannot be read: {exc.strerror}", hint="check the file's permissions") from None
    except UnicodeDecodeError:
        raise AuthError(f"{path}: not UTF-8 text, so not a valid kaggle.json", hint=KAGGLE_JSON_HINT) from None
    except json.JSONDecodeError as exc:  # its message names a position, never the content (the key)
        raise AuthError(f"{path}: not valid JSON ({exc.msg}: line {exc.lineno} column {exc.colno})",
                        hint=KAGGLE_JSON_HINT) from None
    if not isinstance(document, dict):
        raise AuthError(f"{path}: not a JSON object but a {type(document).__name__}", hint=KAGGLE_JSON_HINT)
    return document


def resolve_owner(explicit: str | None, spec_owner: str | None, spec_path: Path) -> str:
    owner = explicit or spec_owner or kaggle_username()
    if not owner:
        raise SpecError(
            f"{spec_path}: [kernel] owner is not set and no Kaggle username was found",
            hint="set [kernel] owner = \"<your kaggle username>\", pass --owner, or set KAGGLE_USERNAME / kaggle.json",
        )
    return owner


MIN_SECRET_LENGTH = 8  # shorter values would match by chance; real keys and tokens are 32+ characters
# An environment variable with such a name holds a credential (its value is refused in every bundle).
CREDENTIAL_VARIABLE = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_KEY|_KEY$|^AWS_SESSION", re.IGNORECASE)
PUBLIC_VARIABLES = frozenset({"GPG_KEY"})
NOT_SECRETS = frozenset({"disabled", "enabled", "disable", "enable", "false", "true"})  # TOKENIZERS_PARALLELISM=...


@dataclass(frozen=True)
class Secret:
    """A credential value, and what to call it in a message (``what`` never includes the value)."""

    what: str
    value: str = field(repr=False)  # a Secret in a traceback or a debug print shows its name only


def secret_values(environ: Mapping[str, str] | None = None) -> tuple[Secret, ...]:
    """The key and token values of every Kaggle credential the client could use, where the client finds them
    (kaggle-api.md §2): KAGGLE_KEY, kaggle.json's key, KAGGLE_API_TOKEN (a value or a file),
    ~/.kaggle/access_token(.txt), ~/.kaggle/credentials.json (OAuth), and the HTTP Basic header
    ``base64(username:key)`` the client sends, and the value of any credential in the environment
    (:func:`environment_credentials`). Unreadable or malformed files are skipped here."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME", str(Path.home())))
    keys, users = _api_keys(env)
    unique: dict[str, Secret] = {}
    for secret in (*keys, *_basic_headers(keys, users), *_tokens(env, home), *environment_credentials(env)):
        # The first name of a value wins (KAGGLE_KEY over a kaggle.json that holds the same key).
        if len(secret.value.strip()) >= MIN_SECRET_LENGTH:
            unique.setdefault(secret.value, secret)
    return tuple(unique.values())


def environment_credentials(env: Mapping[str, str]) -> list[Secret]:
    """Variables whose name says they hold a credential (``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``GITHUB_TOKEN``,
    ``*_API_KEY``, ``*_PASSWORD``...): their values, as a secret each. A path, a number, a switch (``false``) or a
    value with spaces is not a key,
    and a few well-known public values (``GPG_KEY``: the Python image's release-signing key id) are left out."""
    found = []
    for name, value in sorted(env.items()):
        value = value.strip()
        if not CREDENTIAL_VARIABLE.search(name) or name in PUBLIC_VARIABLES or name.startswith("KAGGLE_"):
            continue
        if (len(value) < MIN_SECRET_LENGTH or any(char.isspace() for char in value) or value.startswith(("/", "~", "."))
                or value.isdigit() or value.lower() in NOT_SECRETS):
            continue
        found.append(Secret(f"the value of ${name}", value))
    return found


def _api_keys(env: Mapping[str, str]) -> tuple[list[Secret], set[str]]:
    """Legacy API keys, and the usernames they may go with."""
    keys, users = [], {env.get("KAGGLE_USERNAME", "")}
    if env.get("KAGGLE_KEY"):
        keys.append(Secret("the Kaggle API key (KAGGLE_KEY)", env["KAGGLE_KEY"]))
    for path in kaggle_json_candidates(env):
        config = _json_file(path)
        if config.get("key"):
            keys.append(Secret(f"the Kaggle API key of {path}", str(config["key"])))
            users.add(str(config.get("username") or ""))
    return keys, {user for user in users if user}


def _basic_headers(keys: list[Secret], users: set[str]) -> list[Secret]:
    """What the client sends for a key (``Authorization: Basic base64(user:key)``), as a log would hold it."""
    return [Secret(f"{key.what}, as an HTTP Basic authorization",
                   base64.b64encode(f"{user}:{key.value}".encode()).decode())
            for key in keys for user in sorted(users)]


def _tokens(env: Mapping[str, str], home: Path) -> list[Secret]:
    tokens = []
    token = env.get("KAGGLE_API_TOKEN", "")
    if token:  # the client takes the variable as a path when such a file exists
        from_file = _text_file(Path(token)) if len(token) < 4096 else ""
        tokens.append(Secret("the Kaggle access token (KAGGLE_API_TOKEN)", from_file or token))
    for name in ("access_token", "access_token.txt"):
        value = _text_file(home / ".kaggle" / name)
        if value:
            tokens.append(Secret(f"the Kaggle access token of {home / '.kaggle' / name}", value))
    oauth = _json_file(home / ".kaggle" / "credentials.json")
    for key in ("refresh_token", "access_token"):
        if oauth.get(key):
            tokens.append(Secret(f"the Kaggle OAuth {key.replace('_', ' ')} of ~/.kaggle/credentials.json",
                                 str(oauth[key])))
    return tokens


def _json_file(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _text_file(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip() if path.is_file() else ""
    except (OSError, ValueError):
        return ""
