"""Secrets: personal API tokens, password hashes, browser sessions and their CSRF values.

- A token is ``agt_`` + 32 random bytes (URL-safe); only its SHA-256 is stored, so a database leak
  gives nobody a usable token (a token has 256 bits of entropy: a fast hash is enough).
- Passwords are hashed with argon2id (``argon2-cffi``); hashing takes ~50 ms of CPU, so callers
  run ``hash_password``/``verify_password`` in a worker thread.
- A browser session is a random cookie value (stored as its SHA-256) with its own CSRF value,
  which the page sends back in ``X-CSRF-Token`` on every unsafe request.
- ``redact`` removes anything that looks like a key or token from text meant for logs and errors.
- ``KeyBox`` encrypts provider keys at rest (Fernet: AES-128-CBC + HMAC-SHA256) with the server's
  secret, so a database dump or a driver's debug log never shows a usable key.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import tempfile
import time
from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

__all__ = [
    "TOKEN_PREFIX",
    "KeyBox",
    "hash_password",
    "hash_secret",
    "new_password",
    "new_secret",
    "new_token",
    "redact",
    "same",
    "verify_password",
]

TOKEN_PREFIX = "agt_"
_HASHER = PasswordHasher()
_SECRETISH = re.compile(  # a key starts a word: `u_Xsk-12345678` (a random id) is not one
    r"(?<![A-Za-z0-9_\-])(agt_[A-Za-z0-9_\-]{8,}|sk-[A-Za-z0-9_\-]{8,}"
    r"|(?i:bearer)\s+[A-Za-z0-9_\-.=]{8,})"
)


def new_token() -> str:
    """A new personal API token (shown once; store ``hash_secret(token)``)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_secret() -> str:
    """A random value for cookies and CSRF (32 bytes, URL-safe)."""
    return secrets.token_urlsafe(32)


def new_password() -> str:
    """A random password that is easy to type (20 characters)."""
    return secrets.token_urlsafe(15)


def hash_secret(value: str) -> str:
    """The SHA-256 hex digest stored for a token or cookie value."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def same(a: str, b: str) -> bool:
    """Compare two secrets in constant time."""
    return hmac.compare_digest(
        a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass")
    )


def hash_password(password: str) -> str:
    """An argon2id hash of ``password`` (CPU-heavy: call it in a worker thread)."""
    return _HASHER.hash(password)


def verify_password(stored: str | None, password: str) -> bool:
    """Whether ``password`` matches the ``stored`` hash (``None``: no password set). Runs the
    hash even without a stored one, so timing does not reveal which accounts exist."""
    try:
        if stored is None:
            _HASHER.verify(_DUMMY, password + "x")
            return False
        return _HASHER.verify(stored, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def redact(text: str) -> str:
    """``text`` with tokens, provider keys and bearer credentials replaced by ``[redacted]``."""
    return _SECRETISH.sub("[redacted]", text)


_DUMMY = _HASHER.hash("not a password anyone has")


class KeyBox:
    """Encrypts and decrypts provider keys with one secret (a Fernet key).

    ``seal(key)`` gives ``"fernet:" + token``; ``open(stored)`` reverses it. ``KeyBox.load(secret,
    path)`` uses ``secret`` when given, else the key in ``path``, created (mode 0600) on first use;
    every worker of one service must use the same secret.
    """

    PREFIX = "fernet:"

    def __init__(self, secret: str) -> None:
        from cryptography.fernet import Fernet

        try:
            self._fernet = Fernet(secret.encode("ascii"))
        except (ValueError, UnicodeEncodeError):
            from agentica_team.errors import BadRequest

            raise BadRequest(
                "secret_key must be 32 URL-safe base64-encoded bytes (make one with "
                "`python -c 'import secrets,base64; print(base64.urlsafe_b64encode("
                "secrets.token_bytes(32)).decode())'`)"
            ) from None

    @classmethod
    def load(cls, secret: str, path: Path) -> KeyBox:
        """The box of ``secret``, else of the key file ``path`` (created when missing); blocking
        file IO: call it in a worker thread."""
        if secret:
            return cls(secret)
        for _ in range(50):
            try:
                text = path.read_text(encoding="ascii").strip()
            except FileNotFoundError:
                _create_key_file(path)
                continue
            if text:
                return cls(text)
            time.sleep(0.01)  # pragma: no cover - another process is between open and write
        return cls(path.read_text(encoding="ascii").strip())

    def seal(self, key: str) -> str:
        return self.PREFIX + self._fernet.encrypt(key.encode("utf-8")).decode("ascii")

    def open(self, stored: str) -> str:
        """The key ``seal`` sealed (a value without the prefix is returned as it is)."""
        if not stored.startswith(self.PREFIX):
            return stored
        from cryptography.fernet import InvalidToken

        try:
            return self._fernet.decrypt(stored[len(self.PREFIX) :].encode("ascii")).decode("utf-8")
        except InvalidToken:
            from agentica_team.errors import BadRequest

            raise BadRequest(
                "a provider key stored in the database cannot be decrypted with this server's "
                "secret_key (was the secret changed?): set the course's model_api_key again"
            ) from None


def _create_key_file(path: Path) -> None:
    """Write a new key to ``path`` atomically (0600): written to a private temporary file,
    then linked into place, so a process starting at the same time reads either nothing or
    the whole key, and the first to link wins."""
    from cryptography.fernet import Fernet

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".secret-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(Fernet.generate_key())
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        os.unlink(temporary)
