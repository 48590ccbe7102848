"""Run by the generated-client test with the openapi venv's python (never Confer's).

Usage: openapi_client_probe.py <dir holding the generated package> <base URL>
Imports the client openapi-python-client generated from a live Confer's /openapi.json, makes
calls that must fail (bad input, no credentials) and prints, for each, the status and what
the generated code parsed the answer into, as one JSON object.
"""

import json
import sys

sys.path.insert(0, sys.argv[1])

from confer_client import AuthenticatedClient, Client
from confer_client.api.accounts import me_v1_me_get, register_v1_auth_register_post
from confer_client.models import ProblemDetails, RegisterCreate, TokenPublic


def describe(response) -> dict:  # type: ignore[no-untyped-def]
    parsed = response.parsed
    out = {"status": int(response.status_code), "type": type(parsed).__name__}
    if isinstance(parsed, ProblemDetails):
        out.update(code=parsed.code, title=parsed.title, problem_status=parsed.status)
        errors = parsed.errors if isinstance(parsed.errors, list) else []
        out["error_fields"] = [e.to_dict() for e in errors]
    return out


def main(base_url: str) -> None:
    client = Client(base_url=base_url, raise_on_unexpected_status=True)
    bad = register_v1_auth_register_post.sync_detailed(
        client=client, body=RegisterCreate(username="no spaces allowed!", password="x")
    )
    good = register_v1_auth_register_post.sync_detailed(
        client=client, body=RegisterCreate(username="gen_client", password="a long enough pass")
    )
    assert isinstance(good.parsed, TokenPublic), good.content
    taken = register_v1_auth_register_post.sync_detailed(
        client=client, body=RegisterCreate(username="gen_client", password="a long enough pass")
    )
    anonymous = me_v1_me_get.sync_detailed(
        client=AuthenticatedClient(base_url=base_url, token="not-a-token")
    )
    print(
        json.dumps(
            {
                "bad": describe(bad),
                "taken": describe(taken),
                "anonymous": describe(anonymous),
                "registered": good.parsed.to_dict(),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[2])
