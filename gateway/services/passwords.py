"""Password hashing with argon2id (RFC 9106) via argon2-cffi, off the event loop.

Defaults are RFC 9106 §4's second recommended option (t=3, m=64 MiB, p=4), configurable via
``CONFER_ARGON2_*``. At most ``argon2_max_concurrency`` hashes run at once, so a burst of
logins cannot take 64 MiB × N of memory. ``verify`` always does one full argon2 verification —
against a dummy hash of the same parameters when the account does not exist or is deleted — so
"no such user" and "wrong password" cost the same time. The dummy is a well-formed PHC string
with random salt and digest (RFC 9106 §3.1 parameters of the hasher), not a hash the server
computes: verifying it costs one full argon2 computation like any other, and start-up does not
spend one on it.
"""

from __future__ import annotations

import asyncio
import base64
import os
from dataclasses import dataclass

from argon2 import PasswordHasher, Type
from argon2.exceptions import InvalidHashError, VerificationError

from gateway.settings import Settings


@dataclass(frozen=True)
class Verification:
    """Outcome of ``Passwords.verify``: ``ok`` and whether the stored hash should be replaced."""

    ok: bool
    needs_rehash: bool = False


class Passwords:
    """argon2id hasher with a concurrency cap and a dummy hash for timing parity."""

    def __init__(self, settings: Settings) -> None:
        self.hasher = PasswordHasher(
            time_cost=settings.argon2_time_cost,
            memory_cost=settings.argon2_memory_kib,
            parallelism=settings.argon2_parallelism,
            type=Type.ID,
        )
        self._slots = asyncio.Semaphore(settings.argon2_max_concurrency)
        self._dummy_hash = dummy_hash(self.hasher)

    @property
    def parameters(self) -> dict[str, int]:
        """``{"time_cost", "memory_kib", "parallelism"}`` of new hashes."""
        return {
            "time_cost": self.hasher.time_cost,
            "memory_kib": self.hasher.memory_cost,
            "parallelism": self.hasher.parallelism,
        }

    async def hash(self, password: str) -> str:
        """A PHC-format argon2id hash of ``password`` (``$argon2id$v=19$m=…``)."""
        async with self._slots:
            return await asyncio.to_thread(self.hasher.hash, password)

    async def verify(self, stored_hash: str | None, password: str) -> Verification:
        """Check ``password`` against ``stored_hash`` (None: verify against the dummy hash and
        fail). ``needs_rehash`` is True when the hash was made with other parameters."""
        target = stored_hash or self._dummy_hash
        async with self._slots:
            ok = await asyncio.to_thread(self._verify, target, password)
        if not ok or stored_hash is None:
            return Verification(False)
        return Verification(True, self.hasher.check_needs_rehash(stored_hash))

    def _verify(self, stored_hash: str, password: str) -> bool:
        try:
            return self.hasher.verify(stored_hash, password)
        except (VerificationError, InvalidHashError):
            return False


def dummy_hash(hasher: PasswordHasher) -> str:
    """A PHC-format argon2id string with ``hasher``'s parameters, a random salt and a random
    digest: no password verifies against it, and checking one costs what a real one does."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode().rstrip("=")  # PHC: standard alphabet, no padding

    return (
        f"$argon2id$v=19$m={hasher.memory_cost},t={hasher.time_cost},p={hasher.parallelism}"
        f"${b64(os.urandom(hasher.salt_len))}${b64(os.urandom(hasher.hash_len))}"
    )
