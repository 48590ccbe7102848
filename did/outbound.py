"""The outbound address policy: where a URL that a stranger chose may be fetched from or posted to.

Every request Confer sends to a peer-chosen URL goes through one ``OutboundPolicy``: DID
documents and AgentFacts (:mod:`did.resolver`), and the gateway's federation deliveries and
parked-destination probes (``gateway.workers.delivery``). It defends against SSRF and DNS
rebinding (DESIGN.md "Identity", protocols.md §3.6):

- The host is resolved with ``loop.getaddrinfo`` and refused (``AddressRefusedError``) if *any*
  of its addresses is not public (``is_public_address``: loopback, private, link-local, CGNAT
  100.64/10, multicast, unspecified, reserved, IPv4-mapped/6to4 forms of those), unless the
  address lies in ``allowed_networks``. ``allow_private_networks=True`` switches the policy off
  entirely (local development and tests; the gateway's ``CONFER_ALLOW_PRIVATE_NETWORKS``).
- Pinning: when the policy is on, the request goes to exactly a checked IP (tried in resolver
  order on connection failure), with the real ``Host`` header and, for https,
  ``extensions={"sni_hostname": host}`` so that httpcore sends SNI for the host and verifies the
  certificate against it. Pinned requests carry ``Connection: close`` so that an IP-keyed
  pooled connection, verified for one host name, is never reused for another. With the policy
  off nothing is pinned (every address is allowed, so there is nothing to pin against).
- Redirects are never followed here (``follow_redirects=False``): a caller that wants one
  checks the target and sends a new request through the policy.

Known gaps: the lookup uses the system resolver, not DNS-over-HTTPS (did:web §3.2 step 8
SHOULD); ``Connection: close`` is forbidden in HTTP/2, so enabling h2 on the client would need
this revisited (h2 is not installed today).
"""

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

import httpx

from did.errors import AddressRefusedError, DIDResolutionError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_PORTS = {"https": 443, "http": 80}


def is_public_address(ip: IPAddress) -> bool:
    """True if ``ip`` is a globally routable unicast address (RFC 6890 special-purpose registries
    as encoded by ``ipaddress``); IPv4-mapped and 6to4 IPv6 addresses are judged by the IPv4
    address they embed. CGNAT 100.64.0.0/10 is not global, so it is refused too."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return is_public_address(ip.ipv4_mapped)
        if ip.sixtofour is not None and not is_public_address(ip.sixtofour):
            return False
    return ip.is_global and not (
        ip.is_multicast
        or ip.is_private
        or ip.is_reserved
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_unspecified
    )


@dataclass(frozen=True)
class OutboundPolicy:
    """Which addresses outbound requests may reach, and how they are sent (module docstring).

    ``allow_private_networks`` turns the policy off; ``allowed_networks`` are exempted from it
    while keeping it on (e.g. peers on a known private network).
    """

    allow_private_networks: bool = False
    allowed_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def build(
        cls,
        *,
        allow_private_networks: bool = False,
        allowed_networks: Iterable[str | IPNetwork] = (),
    ) -> "OutboundPolicy":
        """A policy from settings; ``allowed_networks`` are CIDR strings or networks.

        Raises ValueError for a malformed network.
        """
        networks = tuple(ipaddress.ip_network(n) for n in allowed_networks)
        return cls(allow_private_networks=allow_private_networks, allowed_networks=networks)

    def allows(self, ip: IPAddress) -> bool:
        """True if the policy lets requests reach ``ip``."""
        if self.allow_private_networks:
            return True
        exempt = any(ip.version == net.version and ip in net for net in self.allowed_networks)
        return exempt or is_public_address(ip)

    async def checked_addresses(self, url: httpx.URL) -> list[str]:
        """All addresses of the URL's host, in resolver order.

        Raises AddressRefusedError if any is forbidden, DIDResolutionError if the host does not
        resolve (or has no addresses).
        """
        host = url.raw_host.decode("ascii")
        port = url.port or DEFAULT_PORTS.get(url.scheme, 443)
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise DIDResolutionError(f"cannot resolve host {host!r}: {exc}") from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        for address in addresses:
            ip = ipaddress.ip_address(address)
            if not self.allows(ip):
                raise AddressRefusedError(f"{host} resolves to {ip}, which is not a public address")
        if not addresses:
            raise DIDResolutionError(f"host {host!r} has no addresses")
        return addresses

    async def send(self, client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
        """Send ``request`` streamed, never following redirects, under the policy.

        ``request`` is built for its real URL (signatures and ``Host`` cover that URL); with the
        policy on it is re-addressed to each checked IP in turn until one connects. The caller
        must close the response. Raises AddressRefusedError, DIDResolutionError (host does not
        resolve) or the httpx errors of the exchange (the last ``ConnectError`` when no address
        connects).
        """
        if self.allow_private_networks:
            return await client.send(request, stream=True, follow_redirects=False)
        failure: httpx.ConnectError | None = None
        for address in await self.checked_addresses(request.url):
            try:
                return await client.send(
                    _pinned(request, address), stream=True, follow_redirects=False
                )
            except httpx.ConnectError as exc:
                failure = exc
        assert failure is not None  # checked_addresses never returns an empty list
        raise failure


def _pinned(request: httpx.Request, address: str) -> httpx.Request:
    """A copy of ``request`` sent to ``address`` but naming (Host, SNI) its real host."""
    url = request.url
    headers = httpx.Headers(request.headers)
    headers["Host"] = url.netloc.decode("ascii")
    headers["Connection"] = "close"
    extensions = dict(request.extensions)
    if url.scheme == "https":
        extensions["sni_hostname"] = url.raw_host.decode("ascii")
    return httpx.Request(
        request.method,
        url.copy_with(host=address),
        headers=headers,
        content=request.content,
        extensions=extensions,
    )


async def read_capped(response: httpx.Response, max_bytes: int) -> bytes | None:
    """The streamed ``response``'s body, or None as soon as it is known to exceed
    ``max_bytes`` (by ``Content-Length`` or while reading; the rest is never read)."""
    declared = response.headers.get("Content-Length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > max_bytes:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():  # identity was asked: no decompression
        size += len(chunk)
        if size > max_bytes:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
