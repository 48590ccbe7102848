"""OutboundPolicy against a real loopback server: refuse, pin, or (switched off) pass through."""

import ipaddress
from collections.abc import AsyncIterator

import httpx
import pytest

from did.errors import AddressRefusedError, DIDResolutionError
from did.outbound import OutboundPolicy
from tests.did.httpserver import LoopbackServer, respond


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(trust_env=False) as client:
        yield client


def post(client: httpx.AsyncClient, server: LoopbackServer) -> httpx.Request:
    return client.build_request(
        "POST", server.url("/a2a"), content=b'{"x":1}', headers={"Signature": "sig=:AAAA:"}
    )


async def test_the_default_policy_refuses_loopback_before_sending(
    client: httpx.AsyncClient, server: LoopbackServer
) -> None:
    with pytest.raises(AddressRefusedError, match=r"127\.0\.0\.1, which is not a public"):
        await OutboundPolicy().send(client, post(client, server))
    assert server.requests == []


async def test_an_exempted_network_is_reached_pinned_with_the_real_host_and_body(
    client: httpx.AsyncClient, server: LoopbackServer
) -> None:
    server.routes["/a2a"] = respond(200, b"{}", "application/json")
    policy = OutboundPolicy.build(allowed_networks=["127.0.0.0/8", "::1/128"])
    response = await policy.send(client, post(client, server))
    await response.aread()
    await response.aclose()
    assert response.status_code == 200
    [seen] = server.requests
    assert seen.headers["host"] == f"localhost:{server.port}"
    assert seen.headers["connection"] == "close"
    assert seen.headers["signature"] == "sig=:AAAA:"
    assert seen.body == b'{"x":1}'


async def test_switched_off_the_request_is_sent_as_built(
    client: httpx.AsyncClient, server: LoopbackServer
) -> None:
    server.routes["/a2a"] = respond(307, content_type="text/plain", Location="http://10.0.0.1/")
    response = await OutboundPolicy(allow_private_networks=True).send(client, post(client, server))
    await response.aclose()
    assert response.status_code == 307  # never followed
    assert server.requests[0].headers.get("connection") != "close"


async def test_an_unknown_host_is_a_resolution_error_not_a_refusal(
    client: httpx.AsyncClient,
) -> None:
    request = client.build_request("GET", "http://nonexistent.invalid/")
    with pytest.raises(DIDResolutionError, match="cannot resolve host") as excinfo:
        await OutboundPolicy().send(client, request)
    assert not isinstance(excinfo.value, AddressRefusedError)


def test_allows() -> None:
    policy = OutboundPolicy.build(allowed_networks=["10.1.0.0/16"])
    assert policy.allows(ipaddress.ip_address("8.8.8.8"))
    assert policy.allows(ipaddress.ip_address("10.1.2.3"))
    assert not policy.allows(ipaddress.ip_address("10.2.0.1"))
    assert not policy.allows(ipaddress.ip_address("::ffff:10.2.0.1"))
    assert OutboundPolicy(allow_private_networks=True).allows(ipaddress.ip_address("10.2.0.1"))
    with pytest.raises(ValueError):
        OutboundPolicy.build(allowed_networks=["not a network"])
