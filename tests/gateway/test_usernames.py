"""Username rules: unit checks of the normalisation, and registration over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.services import usernames
from tests.gateway.harness import Instance, run_instance


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("alice", "alice"),
        ("аlice", "alice"),  # Cyrillic а
        ("ａｌｉｃｅ", "alice"),  # full-width
        ("ALICE", "alice"),
        ("a1ice", "alice"),
        ("rnallory", "mallory"),
        ("b0b", "bob"),
    ],
)
def test_skeleton_folds_look_alikes(name: str, expected: str) -> None:
    assert usernames.skeleton(name) == usernames.skeleton(expected) == expected


def test_distinct_names_keep_distinct_skeletons() -> None:
    assert usernames.skeleton("alice") != usernames.skeleton("alina")
    assert usernames.skeleton("bob.smith") != usernames.skeleton("bob-smith")


@pytest.mark.parametrize("char", ["\u200b", "\u200d", "\u202e", "\u2066", "\u00ad", "\ufe0f", " "])
def test_invisible_and_bidi_characters_are_found(char: str) -> None:
    assert usernames.invisible_characters(f"al{char}ice")
    assert not usernames.invisible_characters("alice")


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


async def _register(instance: Instance, username: str) -> tuple[int, dict]:
    response = await instance.client.post(
        "/v1/auth/register", json={"username": username, "password": "long enough pw"}
    )
    return response.status_code, response.json()


@pytest.mark.parametrize(
    "lookalike",
    ["ａｌｉｃｅ", "аlice", "alicе", "a1ice", "ALICE", "AlIce", "ａlice"],
)
async def test_confusable_with_existing_name_is_taken(instance: Instance, lookalike: str) -> None:
    await instance.register("alice")
    status, body = await _register(instance, lookalike)
    assert (status, body["code"]) == (409, "username_taken"), body
    async with instance.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM users") == 1


async def test_multi_character_lookalike_is_taken(instance: Instance) -> None:
    await instance.register("mallory")
    status, body = await _register(instance, "rnallory")
    assert (status, body["code"]) == (409, "username_taken")


@pytest.mark.parametrize(
    "name",
    ["al\u200bice", "\u202eecila", "bo\u200db", "al ice", "x" * 65, "bob\u2066", "ha\u3164x"],
)
async def test_invisible_bidi_and_long_names_are_422(instance: Instance, name: str) -> None:
    status, body = await _register(instance, name)
    assert (status, body["code"]) == (422, "validation_failed"), body
    assert body["errors"][0]["loc"] == ["body", "username"]


async def test_non_ascii_name_not_confusable_is_422_naming_the_field(instance: Instance) -> None:
    status, body = await _register(instance, "josé")
    assert status == 422
    assert body["errors"][0]["loc"] == ["body", "username"]


async def test_login_normalises_the_username(instance: Instance) -> None:
    await instance.register("alice", "correct horse battery")
    for typed in ("ALICE", "ａｌｉｃｅ"):
        response = await instance.client.post(
            "/v1/auth/login", json={"username": typed, "password": "correct horse battery"}
        )
        assert response.status_code == 200, response.text
        assert response.json()["user"]["username"] == "alice"


async def test_did_of_a_username_resolves(instance: Instance) -> None:
    alice = await instance.register("a.b_c-d")
    assert alice.did.endswith(":users:a.b_c-d")
    response = await instance.client.get("/users/a.b_c-d/did.json")
    assert response.status_code == 200
    assert response.json()["id"] == alice.did


@pytest.mark.parametrize(
    ("name", "detail"),
    [
        # the rule, then what is refused: not only "U+0020 SPACE"
        ("bad user!", f"{usernames.RULE}; not allowed: U+0020 SPACE"),
        # "bad!" is no username either: no suggestion, the rule
        ("Bad!", usernames.RULE),
        ("Alice", "usernames are written in lower case: use 'alice'"),
        ("x" * 65, "invalid fields: body.username: String should have at most 64 characters"),
    ],
)
async def test_username_refusals_say_what_a_username_may_be(
    instance: Instance, name: str, detail: str
) -> None:
    status, body = await _register(instance, name)
    assert (status, body["code"]) == (422, "validation_failed"), body
    assert body["detail"] == detail, body


async def test_an_over_long_field_says_its_limit(instance: Instance) -> None:
    """A 422 from the request's schema names each field with its reason."""
    response = await instance.client.post(
        "/v1/auth/register", json={"username": "bob", "password": "p" * 5000}
    )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail.startswith("invalid fields: body.password: "), detail
    assert "at most" in detail and "characters" in detail, detail
