"""Agents settings over real HTTP, and the provider catalog."""

from __future__ import annotations

import ast
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.agents.catalog import PROVIDERS, get_provider, llm_providers
from tests.gateway.harness import Instance, run_instance

ROOT = Path(__file__).resolve().parents[2]


def test_catalog_has_the_llm_providers_and_tools() -> None:
    ids = [p.id for p in PROVIDERS]
    assert len(ids) == len(set(ids))
    assert len(llm_providers()) >= 18
    assert get_provider("tavily").kind == "tool"
    assert get_provider("anthropic").api_style == "anthropic"
    assert get_provider("offline").requires_key is False


def _provider_literals(node: ast.AST, ids: set[str]) -> set[str]:
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = node.elts
    elif isinstance(node, ast.Dict):
        items = [k for k in node.keys if k is not None]
    else:
        return set()
    return {i.value for i in items if isinstance(i, ast.Constant) and i.value in ids}


def test_no_other_module_enumerates_providers() -> None:
    """No list, tuple, set or dict outside the catalog names two or more provider ids
    (data model spec, LLMKeys: the providers are enumerated in one place only)."""
    ids = {p.id for p in PROVIDERS}
    offenders = []
    for path in [*ROOT.glob("gateway/**/*.py"), *ROOT.glob("models/**/*.py")]:
        if path.name == "catalog.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            named = _provider_literals(node, ids)
            if len(named) >= 2:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {sorted(named)}")
    assert not offenders


def test_the_enumeration_check_can_fail() -> None:
    tree = ast.parse("KNOWN = ('openai', 'anthropic')")
    assert _provider_literals(tree.body[0].value, {p.id for p in PROVIDERS}) == {
        "openai",
        "anthropic",
    }


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


async def test_get_and_patch_my_agent(instance: Instance) -> None:
    alice = await instance.register("alice")
    agent = (await alice.request("GET", "/v1/agents/me")).json()
    assert agent["did"] == alice.profile["agent_did"]
    assert agent["model_config"]["brain"]["provider"] == "offline"
    response = await alice.request(
        "PATCH",
        "/v1/agents/me",
        json={
            "name": "Research buddy",
            "style": "technical",
            "primary_language": "es",
            "model_config": {
                "brain": {"provider": "anthropic", "model": "claude-x", "temperature": 0.3}
            },
            "policies": {
                "default": "deny",
                "rules": [
                    {"peer": "did:web:b.example:users:bob", "action": "read", "effect": "allow"}
                ],
            },
            "capabilities": [{"type": "qa", "scope": ["papers"], "languages": ["en", "es"]}],
            "is_public": True,
        },
    )
    assert response.status_code == 200, response.text
    updated = response.json()
    assert updated["style"] == "technical" and updated["is_public"] is True
    assert updated["model_config"]["brain"]["provider"] == "anthropic"
    assert updated["model_config"]["quick"]["provider"] == "offline"  # other jobs kept
    assert updated["policies"]["default"] == "deny"
    by_id = await alice.request("GET", f"/v1/agents/{agent['id']}")
    assert by_id.json() == updated
    patched = await alice.request("PATCH", f"/v1/agents/{agent['id']}", json={"name": "B2"})
    assert patched.json()["name"] == "B2" and patched.json()["style"] == "technical"


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"style": "sarcastic"}, ["body", "style"]),
        ({"style": None}, ["body", "style"]),
        ({"primary_language": "english"}, ["body", "primary_language"]),
        (
            {"model_config": {"brain": {"provider": "acme", "model": "m"}}},
            ["body", "model_config", "brain", "provider"],
        ),
        (
            {"model_config": {"quick": {"provider": "tavily", "model": "m"}}},
            ["body", "model_config", "quick", "provider"],
        ),
        (
            {"model_config": {"brain": {"provider": "openai", "model": "m", "temperature": 9}}},
            ["body", "model_config", "brain", "temperature"],
        ),
        (
            {"model_config": {"dream": {"provider": "openai", "model": "m"}}},
            ["body", "model_config", "dream"],
        ),
        ({"policies": {"default": "maybe", "rules": []}}, ["body", "policies", "default"]),
        (
            {
                "policies": {
                    "default": "ask",
                    "rules": [{"action": "read", "effect": "allow", "peer": "bob"}],
                }
            },
            ["body", "policies", "rules", 0, "peer"],
        ),
        (
            {"policies": {"default": "ask", "rules": [{"action": "fly", "effect": "allow"}]}},
            ["body", "policies", "rules", 0, "action"],
        ),
        ({"capabilities": [{"type": "qa"}]}, ["body", "capabilities", 0, "scope"]),
        ({"is_public": "yes please"}, ["body", "is_public"]),
        ({"owner": "me"}, ["body", "owner"]),
        ({"model_config": None}, ["body", "model_config"]),
        ({"policies": None}, ["body", "policies"]),
        ({"capabilities": None}, ["body", "capabilities"]),
    ],
)
async def test_invalid_agent_fields_are_422_naming_the_field(
    instance: Instance, body: dict, loc: list
) -> None:
    alice = await instance.register("alice")
    before = (await alice.request("GET", "/v1/agents/me")).json()
    response = await alice.request("PATCH", "/v1/agents/me", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["loc"] == loc
    assert (await alice.request("GET", "/v1/agents/me")).json() == before


async def test_someone_elses_agent_is_404(instance: Instance) -> None:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    bob_agent = (await bob.request("GET", "/v1/agents/me")).json()
    for method, kwargs in (("GET", {}), ("PATCH", {"json": {"name": "mine now"}})):
        response = await alice.request(method, f"/v1/agents/{bob_agent['id']}", **kwargs)
        assert (response.status_code, response.json()["code"]) == (404, "agent_not_found")


async def test_provider_catalog_endpoint(instance: Instance) -> None:
    response = await instance.client.get("/v1/providers")
    assert {p["id"] for p in response.json()} == {p.id for p in PROVIDERS}


async def test_operator_endpoints_are_providers_of_the_instance(database_url: str) -> None:
    """``CONFER_LLM_PROVIDERS`` adds ids an agent may use, lists them, and takes keys."""
    extra = {
        "local": {"base_url": "http://127.0.0.1:9/v1", "wire": "openai"},
        "ollama": {"base_url": "http://10.0.0.5:11434/v1"},
    }
    async with run_instance(database_url, llm_providers=extra) as running:
        listed = {p["id"]: p for p in (await running.client.get("/v1/providers")).json()}
        assert listed["local"] == {
            "id": "local",
            "display_name": "local",
            "kind": "llm",
            "api_style": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "requires_key": False,
        }
        assert listed["ollama"]["base_url"] == "http://10.0.0.5:11434/v1"  # override
        alice = await running.register("alice")
        brain = {"provider": "local", "model": "llama-3"}
        patched = await alice.request(
            "PATCH", "/v1/agents/me", json={"model_config": {"brain": brain}}
        )
        assert patched.status_code == 200, patched.text
        assert patched.json()["model_config"]["brain"]["provider"] == "local"
        unknown = await alice.request(
            "PATCH",
            "/v1/agents/me",
            json={"model_config": {"brain": {"provider": "elsewhere", "model": "m"}}},
        )
        assert unknown.status_code == 422
    async with run_instance(database_url) as plain:  # without the setting, "local" is unknown
        assert "local" not in {p["id"] for p in (await plain.client.get("/v1/providers")).json()}


@pytest.mark.parametrize(
    "bad",
    [
        {"Bad Id": {"base_url": "http://x/v1"}},
        {"x": {"base_url": "ftp://x/v1"}},
        {"x": {"base_url": "http://x/v1", "wire": "grpc"}},
        {"x": {"base_url": "http://x/v1", "apikey": "s"}},
    ],
)
def test_bad_provider_endpoints_refuse_to_start(bad: dict) -> None:
    from pydantic import ValidationError

    from gateway.settings import Settings

    with pytest.raises(ValidationError):
        Settings(llm_providers=bad)
