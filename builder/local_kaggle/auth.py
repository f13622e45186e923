"""Who is calling: HTTP Basic ``user:key`` or ``Bearer <token>`` checked against ``users.json``.

Kaggle answers a bad key or token with 401 (the client prints its auth help and exits 1). A request
without any ``Authorization`` header is anonymous: it may read public things, nothing else.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import secrets

from builder.errors import LocalKaggleError
from builder.local_kaggle.store import Store
from builder.local_kaggle.wire import ApiError, Json

_USERNAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,49}$")


class Users:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._path = store.path("users.json")

    def add(self, name: str, key: str, token: str | None = None) -> str:
        """Register (or update) a user; returns the access token that IntrospectToken accepts for them."""
        if not _USERNAME.match(name):
            raise LocalKaggleError(
                f"invalid Kaggle username {name!r}",
                hint="use 2-50 lower-case letters, digits or '-' (Kaggle usernames are slugs)",
            )
        if not key:
            raise LocalKaggleError(f"user {name!r} needs a non-empty API key")
        with self._store.lock:
            users = self._store.read(self._path, {})
            record = users.get(name, {})
            tokens = list(record.get("tokens", []))
            token = token or (tokens[0] if tokens else f"KGAT_{secrets.token_hex(16)}")
            if token not in tokens:
                tokens.append(token)
            users[name] = {"key": key, "tokens": tokens}
            self._store.write(self._path, users)
        return token

    def names(self) -> list[str]:
        return sorted(self._store.read(self._path, {}))

    def authenticate(self, header: str | None) -> str | None:
        """The calling user, ``None`` when anonymous; raises 401 for credentials that do not match."""
        if not header:
            return None
        scheme, _, value = header.partition(" ")
        scheme = scheme.lower()
        if scheme == "basic":
            name, key = _decode_basic(value)
            record = self._store.read(self._path, {}).get(name)
            if record and hmac.compare_digest(record["key"].encode(), key.encode()):
                return name
            raise ApiError(401, "Unauthenticated")
        if scheme == "bearer":
            user = self.user_for_token(value.strip())
            if user:
                return user
            raise ApiError(401, "Unauthenticated")
        raise ApiError(401, "Unauthenticated")

    def user_for_token(self, token: str) -> str | None:
        users: dict[str, Json] = self._store.read(self._path, {})
        for name, record in users.items():
            if any(hmac.compare_digest(token.encode(), known.encode()) for known in record.get("tokens", [])):
                return name
        return None


def _decode_basic(value: str) -> tuple[str, str]:
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise ApiError(401, "Unauthenticated") from None
    name, sep, key = decoded.partition(":")
    if not sep:
        raise ApiError(401, "Unauthenticated")
    return name, key
