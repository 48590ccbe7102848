"""The OpenAPI document at /openapi.json and the docs page at /docs describe the API."""

from __future__ import annotations

from tests.gateway.harness import run_instance

EXPECTED = {
    ("post", "/v1/auth/register"),
    ("post", "/v1/auth/login"),
    ("post", "/v1/auth/logout"),
    ("get", "/v1/me"),
    ("post", "/v1/contacts"),
    ("get", "/v1/contacts"),
    ("post", "/v1/conversations"),
    ("get", "/v1/conversations"),
    ("get", "/v1/conversations/{conversation_id}"),
    ("post", "/v1/conversations/{conversation_id}/messages"),
    ("get", "/v1/conversations/{conversation_id}/messages"),
    ("get", "/.well-known/did.json"),
    ("get", "/users/{username}/did.json"),
    ("get", "/agents/{agent_id}/did.json"),
    ("post", "/users/{username}/a2a"),
    ("post", "/agents/{agent_id}/a2a"),
    ("get", "/healthz"),
    ("get", "/readyz"),
}


async def test_openapi_lists_every_endpoint_with_summary_and_errors(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        spec = (await instance.client.get("/openapi.json")).json()
        docs = await instance.client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    operations = {
        (method, path): op for path, item in spec["paths"].items() for method, op in item.items()
    }
    missing = EXPECTED - set(operations)
    assert not missing, f"not documented: {sorted(missing)}"
    for key, op in operations.items():
        assert op.get("summary") and op.get("description"), f"{key} lacks summary/description"
        codes = set(op["responses"])
        public_documents = {
            "/healthz",
            "/readyz",
            "/.well-known/did.json",
            "/.well-known/agent-card.json",
            "/v1/providers",
        }
        if key[1] not in public_documents:
            assert codes & {"401", "404", "409", "415", "422"}, f"{key} documents no errors"
    assert "websocket.md" in spec["info"]["description"]
