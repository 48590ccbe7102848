"""Username rules: normalisation, invisible-character refusal and confusable skeletons.

A username becomes part of the user's DID (``did:web:<host>:users:<username>``) and of URLs,
so the *stored* form is deliberately plain ASCII: ``a-z 0-9 . _ -``, 2–64 characters, starting
and ending with a letter or digit (docs/accounts.md explains why). Input goes through:

1. refusal of invisible, format, bidi-control and whitespace characters (UTS #39 §3.1
   "Restriction-Level", Unicode general categories Cc/Cf/Zs/Zl/Zp, variation selectors and the
   blank-looking letters U+115F, U+1160, U+3164, U+FFA0, U+2800) → 422;
2. ``canonical``: NFKC of the case-folded NFKC form (Unicode "NFKC_Casefold" done in two
   steps, UAX #15 §5) — what uniqueness and login compare;
3. ``skeleton``: every character mapped to one representative of its confusable group (the
   Unicode confusables data of UTS #39 §4, shipped by ``confusable-homoglyphs``), preferring an
   ASCII lower-case letter, then case-folded, twice; multi-character look-alikes such as ``rn``
   for ``m`` are folded first. Two names with the same skeleton are "the same name" for
   registration.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

from confusable_homoglyphs.utils import load as load_confusables_data

MAX_LENGTH = 64
MIN_LENGTH = 2
STORED_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$")

_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})


def invisible_characters(name: str) -> list[str]:
    """Code points in ``name`` that render as nothing, reorder text or are whitespace.

    Returns them as ``U+XXXX NAME`` strings (empty list when the name is clean).
    """
    found = []
    for ch in name:
        category = unicodedata.category(ch)
        variation = 0xFE00 <= ord(ch) <= 0xFE0F or 0xE0100 <= ord(ch) <= 0xE01EF
        if category in _REFUSED_CATEGORIES or variation or ch in _BLANK_LETTERS:
            found.append(f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')}")
    return found


def canonical(name: str) -> str:
    """NFKC_Casefold of ``name``: ``"ＡＬＩＣＥ"`` → ``"alice"`` (UAX #15, UAX #44)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


@cache
def _groups() -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """(single character → representative, [(multi-character look-alike, representative)])."""
    data = load_confusables_data("confusables.json")
    single: dict[str, str] = {}
    multi: dict[str, str] = {}
    for key, entries in data.items():
        members = [key, *(e["c"].replace("\u200e", "") for e in entries)]
        singles = [m for m in members if len(m) == 1]
        if not singles:
            continue
        representative = min(singles, key=_preference)
        for member in members:
            if len(member) == 1:
                single.setdefault(member, representative)
            elif member.isascii() and representative.isascii():
                multi.setdefault(member, representative)
    ordered = tuple(sorted(multi.items(), key=lambda item: -len(item[0])))
    return single, ordered


def _preference(ch: str) -> tuple[int, int]:
    """Lower sorts first: ASCII lower-case letter, ASCII letter, ASCII digit, anything else."""
    if ch.isascii() and ch.islower():
        rank = 0
    elif ch.isascii() and ch.isalpha():
        rank = 1
    elif ch.isascii() and ch.isdigit():
        rank = 2
    else:
        rank = 3
    return rank, ord(ch)


def skeleton(name: str) -> str:
    """The confusable skeleton of ``name``: ``"аlice"`` (Cyrillic а), ``"a1ice"``, ``"ALICE"``
    and ``"ａｌｉｃｅ"`` all give ``"alice"``; ``"rnallory"`` gives ``"mallory"`` (UTS #39 §4)."""
    single, multi = _groups()
    text = unicodedata.normalize("NFD", canonical(name))
    for _ in range(2):
        for source, target in multi:
            text = text.replace(source, target)
        text = "".join(single.get(ch, ch) for ch in text).casefold()
    return unicodedata.normalize("NFD", text)


RULE = (
    f"a username has {MIN_LENGTH} to {MAX_LENGTH} characters: a-z, 0-9, '.', '_' and '-',"
    " starting and ending with a letter or digit"
)
"""The username rule as a person reads it (STORED_PATTERN, MIN_LENGTH, MAX_LENGTH)."""


def is_valid(name: str) -> bool:
    """Whether ``name`` can be stored as it is (STORED_PATTERN, MIN_LENGTH…MAX_LENGTH)."""
    return MIN_LENGTH <= len(name) <= MAX_LENGTH and STORED_PATTERN.fullmatch(name) is not None


def invisible_problem(name: str) -> str | None:
    """Why ``name`` is refused for characters that render as nothing, reorder text or are
    whitespace (:func:`invisible_characters`), or None: the rule of what a username may have,
    then the refused characters, e.g. ``"…; not allowed: U+0020 SPACE"``."""
    hidden = invisible_characters(name)
    return f"{RULE}; not allowed: {', '.join(hidden)}" if hidden else None


def form_problem(name: str) -> str | None:
    """Why ``name`` cannot be stored as typed, or None when it can.

    Checks canonical form (so ``"Alice"`` is told to write ``"alice"`` — suggested only when
    that form is itself a valid username), length and the stored ASCII pattern
    (STORED_PATTERN); otherwise the message is :data:`RULE`.
    """
    folded = canonical(name)
    if folded != name and is_valid(folded):
        return f"usernames are written in lower case: use {folded!r}"
    if not is_valid(name):
        return RULE
    return None
