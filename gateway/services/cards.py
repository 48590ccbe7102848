"""A2A Agent Cards (A2A §4.2, §8) and NANDA AgentFacts for the instance and public agents.

Cards speak A2A 1.0: ``supportedInterfaces`` (JSON-RPC, protocol version 1.0), skills, the
bearer API-key scheme for stock clients, and Confer's RFC 9421 + did:web authentication
declared as an extension in ``capabilities.extensions`` (A2A has no HTTP-signature scheme),
beside Confer's JSON-RPC batch extension (:mod:`a2a.batch`) when batches are on.
AgentFacts follow the agentfacts-format JSON Schema (required: id, agent_name, label,
description, version, provider, endpoints, capabilities, skills). Strings stay ASCII-safe.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlsplit

from a2a.batch import batch_extension
from a2a.protocol import JSONRPC_BINDING, PROTOCOL_VERSION
from a2a.signatures import ALGORITHM, CONFER_TAG, DEFAULT_COMPONENTS
from gateway.services.identity import Identity
from gateway.settings import Settings
from models import Agent

CONFER_VERSION = "0.1.0"
SIGNATURE_EXTENSION = "urn:confer:a2a:ext:rfc9421-did-web:v1"
API_KEY_SCHEME = "conferApiKey"
CARD_CACHE_CONTROL = "public, max-age=60"
_RELAY = {
    "id": "relay-message",
    "name": "Relay a message",
    "description": "Deliver a text message to this agent and its owner; the task records it.",
    "tags": ["messaging"],
    "inputModes": ["text/plain"],
    "outputModes": ["text/plain", "application/json"],
}


def etag(document: dict[str, Any]) -> str:
    """Weak ETag over the canonical JSON (sorted keys), as A2A SDK servers compute it."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return f'W/"{hashlib.sha256(canonical.encode()).hexdigest()}"'


def _host(identity: Identity) -> str:
    return urlsplit(identity.public_url).netloc


def batch_limits(settings: Settings) -> tuple[int, int] | None:
    """``(maxItems, maxBytes)`` of the JSON-RPC batches this instance accepts (None when
    batches are off: ``federation_batch_max_items`` 1)."""
    if settings.federation_batch_max_items < 2:
        return None
    size = min(settings.federation_batch_max_bytes, settings.max_body_bytes)
    return settings.federation_batch_max_items, size


def signature_extension(identity: Identity, max_age: int) -> dict[str, Any]:
    """``AgentExtension`` declaring Confer's RFC 9421 signatures with did:web keys."""
    return {
        "uri": SIGNATURE_EXTENSION,
        "description": "Confer peers sign every request (RFC 9421, Ed25519) with a key "
        "published in the sender's did:web document; Content-Digest (RFC 9530) is covered.",
        "required": False,
        "params": {
            "tag": CONFER_TAG,
            "alg": ALGORITHM,
            "components": list(DEFAULT_COMPONENTS),
            "requiredParams": ["created", "expires", "nonce", "keyid", "tag"],
            "maxAgeSeconds": max_age,
            "keyDiscovery": "did:web",
            "instanceDid": identity.did,
        },
    }


def _skills(agent: Agent) -> list[dict[str, Any]]:
    skills = [dict(_RELAY)]
    for capability in agent.capabilities:
        skill: dict[str, Any] = {
            "id": capability.type,
            "name": capability.type.replace("-", " ").capitalize(),
            "description": f"{capability.type} ({', '.join(capability.scope) or 'general'})",
            "tags": [capability.type, *capability.scope],
        }
        skills.append(skill)
    return skills


def _card(
    identity: Identity,
    *,
    name: str,
    description: str,
    url: str,
    skills: list[dict[str, Any]],
    max_age: int,
    batch: tuple[int, int] | None,
) -> dict[str, Any]:
    extensions = [signature_extension(identity, max_age)]
    if batch is not None:
        extensions.append(batch_extension(*batch))
    return {
        "name": name,
        "description": description,
        "supportedInterfaces": [
            {"url": url, "protocolBinding": JSONRPC_BINDING, "protocolVersion": PROTOCOL_VERSION}
        ],
        "provider": {"organization": f"Confer ({_host(identity)})", "url": identity.public_url},
        "version": CONFER_VERSION,
        "capabilities": {
            "streaming": True,
            "pushNotifications": True,
            "extensions": extensions,
        },
        "securitySchemes": {
            API_KEY_SCHEME: {
                "httpAuthSecurityScheme": {
                    "scheme": "Bearer",
                    "description": "An API key the agent's owner issued (POST /v1/api-keys).",
                }
            }
        },
        "securityRequirements": [{"schemes": {API_KEY_SCHEME: {"list": []}}}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": skills,
    }


def agent_card(
    identity: Identity, agent: Agent, *, max_age: int, batch: tuple[int, int] | None = None
) -> dict[str, Any]:
    """The Agent Card of a public agent; its interface is ``/agents/{id}/a2a``. ``batch`` is
    ``(maxItems, maxBytes)`` of the batch extension to declare (None: none)."""
    name = agent.name or f"Agent {agent.id}"
    return _card(
        identity,
        name=name,
        description=agent.description or f"{name}, a Confer agent on {_host(identity)}.",
        url=identity.endpoint_for("agents", agent.id),
        skills=_skills(agent),
        max_age=max_age,
        batch=batch,
    )


def instance_card(
    identity: Identity,
    agents: list[Agent],
    *,
    max_age: int,
    batch: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """The instance's card: ``/a2a`` reaches any public agent, one skill per agent.
    ``batch`` as for :func:`agent_card`."""
    skills = [
        dict(
            _RELAY,
            description="Deliver a message to a public agent of this instance: "
            "set params.tenant to the agent id.",
        )
    ]
    for agent in agents:
        skills.append(
            {
                "id": agent.id,
                "name": agent.name or f"Agent {agent.id}",
                "description": agent.description or f"Public agent {agent.did}",
                "tags": ["agent", *[c.type for c in agent.capabilities]],
            }
        )
    return _card(
        identity,
        name=f"Confer at {_host(identity)}",
        description="A Confer instance: people and their agents, federated over A2A.",
        url=f"{identity.public_url}/a2a",
        skills=skills,
        max_age=max_age,
        batch=batch,
    )


def agent_facts(identity: Identity, agent: Agent) -> dict[str, Any]:
    """NANDA AgentFacts for a public agent (agentfacts-format schema v1)."""
    name = agent.name or f"Agent {agent.id}"
    return {
        "id": agent.did,
        "agent_name": f"urn:agent:{urlsplit(identity.public_url).hostname}:{agent.id}",
        "label": name,
        "description": agent.description or f"{name}, a Confer agent.",
        "version": CONFER_VERSION,
        "provider": {
            "name": f"Confer ({_host(identity)})",
            "url": identity.public_url,
            "did": identity.did,
        },
        "endpoints": {"static": [identity.endpoint_for("agents", agent.id)]},
        "capabilities": {
            "modalities": ["text"],
            "streaming": True,
            "authentication": {"methods": ["http-message-signatures", "did:web", "bearer"]},
        },
        "skills": [
            {
                "id": s["id"],
                "description": s["description"],
                "inputModes": ["text/plain"],
                "outputModes": ["text/plain"],
                "supportedLanguages": [agent.primary_language],
            }
            for s in _skills(agent)
        ],
        "documentationUrl": f"{identity.public_url}/agents/{agent.id}/.well-known/agent-card.json",
    }
