"""The OpenAPI document at /openapi.json and the docs page at /docs describe the API."""

from __future__ import annotations

from gateway.app import create_app
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
    ("get", "/v1/push/vapid-public-key"),
    ("post", "/v1/push/subscriptions"),
    ("post", "/v1/auth/password-reset"),
    ("post", "/v1/auth/password-reset/confirm"),
    ("put", "/v1/admin/users/{user_id}/password"),
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
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-authorization-server",
            "/v1/providers",
            "/v1/push/vapid-public-key",
        }
        if key[1] not in public_documents:
            assert codes & {"400", "401", "404", "409", "415", "422"}, f"{key} documents no errors"
    assert "websocket.md" in spec["info"]["description"]


def test_every_error_response_documents_the_problem_details_actually_sent() -> None:
    """A generated client reads an error's ``code`` only if the document gives the schema
    under the media type the server sends (RFC 9457 ``application/problem+json``)."""
    spec = create_app().openapi()
    problem = spec["components"]["schemas"]["ProblemDetails"]
    assert {"type", "title", "status", "detail", "instance", "code"} <= set(problem["properties"])
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    errors = [
        (method, path, status, response)
        for path, item in spec["paths"].items()
        for method, op in item.items()
        for status, response in op["responses"].items()
        if status[0] in "45"
    ]
    assert len(errors) > 100
    for method, path, status, response in errors:
        content = response.get("content", {})
        assert set(content) == {"application/problem+json"}, (method, path, status, content)
        schema = content["application/problem+json"].get("schema")
        assert schema == {"$ref": "#/components/schemas/ProblemDetails"}, (method, path, status)
