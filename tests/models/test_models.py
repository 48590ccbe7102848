"""The pydantic types mirror the spec's interfaces and tables (data model spec)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel, ValidationError

import models

SEED_PATH = Path(__file__).resolve().parents[3] / "shared" / "seeds" / "002_588a61bde5c62329.txt"

USER_ID = "01HZX3Q4J5K6M7N8P9QRSTVWXY"
AGENT_ID = "01HZX3Q4J5K6M7N8P9QRSTVWXZ"
PEER_ID = "01HZX3Q4J5K6M7N8P9QRSTVWY0"
CONVERSATION_ID = "01HZX3Q4J5K6M7N8P9QRSTVWY1"
MESSAGE_ID = "01HZX3Q4J5K6M7N8P9QRSTVWY2"
ROW_ID = "01HZX3Q4J5K6M7N8P9QRSTVWY3"
NOW = "2026-01-02T03:04:05Z"

MODEL_CHOICE = {"provider": "anthropic", "model": "claude-sonnet", "temperature": 0.2}
PREFERENCES = {
    "language": "es",
    "timezone": "Europe/Madrid",
    "notification": {"push": True, "email": False},
    "privacy": {
        "allow_offline_response": True,
        "notification_preview": False,
        "message_requests": True,
    },
}
POLICY_RULE = {
    "peer": "did:web:peer.example:agents:bob",
    "action": "share",
    "pattern": "docs/**",
    "effect": "ask",
}
CITATION = {
    "source": "RFC 9421",
    "url": "https://www.rfc-editor.org/rfc/rfc9421",
    "page": 12,
    "passage": "The signature base is a string",
    "trust_level": "authoritative",
}

# One valid payload per model, in wire form (JSON names, ISO timestamps), every field set.
EXAMPLES: dict[type[BaseModel], dict[str, Any]] = {
    models.NotificationPreferences: {"push": True, "email": True},
    models.PrivacyPreferences: {
        "allow_offline_response": False,
        "notification_preview": False,
        "message_requests": False,
    },
    models.UserPreferences: PREFERENCES,
    models.User: {
        "id": USER_ID,
        "username": "alice",
        "email": "alice@confer.example",
        "phone": "+34600000000",
        "display_name": "Alice",
        "avatar_url": "https://confer.example/a.png",
        "did": "did:web:confer.example:users:alice",
        "preferences": PREFERENCES,
        "llm_keys": {"anthropic": "v1.nonce.ciphertext", "tavily": "v1.nonce.ciphertext2"},
        "created_at": NOW,
        "updated_at": NOW,
        "deleted_at": NOW,
    },
    models.ModelChoice: MODEL_CHOICE,
    models.ModelConfig: {
        "brain": MODEL_CHOICE,
        "quick": MODEL_CHOICE,
        "translation": MODEL_CHOICE,
        "summarize": MODEL_CHOICE,
    },
    models.PolicyRule: POLICY_RULE,
    models.PolicyConfig: {"default": "ask", "rules": [POLICY_RULE]},
    models.Capability: {"type": "code-generation", "scope": ["python"], "languages": ["en"]},
    models.Agent: {
        "id": AGENT_ID,
        "user_id": USER_ID,
        "did": "did:web:confer.example:users:alice:agent",
        "name": "Alice's agent",
        "description": "Answers for Alice",
        "avatar_url": "https://confer.example/agent.png",
        "primary_language": "zh",
        "style": "technical",
        "model_config": {
            "brain": MODEL_CHOICE,
            "quick": MODEL_CHOICE,
            "translation": MODEL_CHOICE,
            "summarize": MODEL_CHOICE,
        },
        "policies": {"default": "deny", "rules": []},
        "capabilities": [{"type": "qa", "scope": [], "languages": ["zh", "en"]}],
        "is_public": True,
    },
    models.Citation: CITATION,
    models.Translation: {"from": "es", "to": "en", "provider": "deepl"},
    models.Message: {
        "id": MESSAGE_ID,
        "conversation_id": CONVERSATION_ID,
        "sender_type": "peer_agent",
        "sender_id": PEER_ID,
        "sender_did": "did:web:peer.example:agents:bob",
        "content_type": "citation",
        "content": "See RFC 9421 §2.5",
        "content_json": {"blocks": [1, 2.5, None, "x"]},
        "in_reply_to": MESSAGE_ID,
        "thread_root": MESSAGE_ID,
        "citations": [CITATION],
        "language": "en",
        "translation": {"from": "zh", "to": "en", "provider": "deepl"},
        "via": "claude-code",
        "created_at": NOW,
        "position": MESSAGE_ID,
    },
    models.PeerAgentRow: {
        "id": PEER_ID,
        "did": "did:web:peer.example:agents:bob",
        "name": "Bob's agent",
        "description": None,
        "avatar_url": None,
        "organization": "Peer Inc.",
        "endpoint": "https://peer.example/a2a",
        "public_key_json": {"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKx"},
        "agent_facts_json": {"id": "did:web:peer.example:agents:bob", "skills": []},
        "fetched_at": NOW,
        "etag": '"abc"',
        "trust_level": "unknown",
        "created_at": NOW,
        "updated_at": NOW,
    },
    models.PeerContactRow: {
        "id": ROW_ID,
        "user_id": USER_ID,
        "peer_id": PEER_ID,
        "alias": "Bob",
        "tags": ["work"],
        "pinned": True,
        "muted": False,
        "policy_overrides_json": {"default": "auto"},
        "added_via": "did",
        "created_at": NOW,
    },
    models.ConversationRow: {
        "id": CONVERSATION_ID,
        "type": "direct_user_agent",
        "name": None,
        "created_by": USER_ID,
        "created_at": NOW,
        "updated_at": NOW,
        "archived_at": None,
    },
    models.ParticipantRow: {
        "id": ROW_ID,
        "conversation_id": CONVERSATION_ID,
        "participant_type": "own_agent",
        "user_id": None,
        "agent_id": AGENT_ID,
        "peer_id": None,
        "role": "observer",
        "joined_at": NOW,
        "last_read_at": NOW,
        "notification": "all",
    },
    models.ThreadRow: {
        "id": ROW_ID,
        "conversation_id": CONVERSATION_ID,
        "root_message_id": MESSAGE_ID,
        "title": "Key rotation",
        "summary": "Keep retired keys listed",
        "tags": ["design"],
        "participants_json": [USER_ID, PEER_ID],
        "created_at": NOW,
        "closed_at": None,
    },
    models.PermissionRow: {
        "id": ROW_ID,
        "user_id": USER_ID,
        "peer_id": PEER_ID,
        "action": "share",
        "scope_json": {"paths": ["docs/**"]},
        "level": "L2",
        "decision": "allow_always",
        "decision_scope": "peer_action",
        "requested_by": PEER_ID,
        "decided_by": USER_ID,
        "expires_at": NOW,
        "created_at": NOW,
        "decided_at": NOW,
    },
    models.ProjectMemoryRow: {
        "id": ROW_ID,
        "user_id": USER_ID,
        "project_id": "github.com/confer/confer",
        "peer_id": PEER_ID,
        "facts_md": "# Facts",
        "decisions_md": "# Decisions",
        "meta_json": {"source": ".claude/peers/bob"},
        "version": 3,
        "created_at": NOW,
        "updated_at": NOW,
    },
    models.SessionRow: {
        "id": ROW_ID,
        "user_id": USER_ID,
        "device_id": "laptop-1",
        "platform": "web",
        "refresh_token_hash": "$argon2id$v=19$...",
        "last_active_at": NOW,
        "created_at": NOW,
        "expires_at": NOW,
    },
    models.AttachmentRow: {
        "id": ROW_ID,
        "message_id": MESSAGE_ID,
        "user_id": USER_ID,
        "filename": "notes.pdf",
        "content_type": "application/pdf",
        "size_bytes": 12345,
        "storage_url": "file:///srv/confer/attachments/notes.pdf",
        "sha256": "0" * 64,
        "created_at": NOW,
        # a peer's file fetched to this instance (the joined attachment_fetches row)
        "source_url": "https://a.example/federation/attachments/01HZX5V8K2M3N4P5Q6R7S8T9V0",
        "origin_did": "did:web:a.example:users:alice",
        "fetch_state": "fetched",
        "fetch_attempts": 1,
        "fetch_next_at": NOW,
        "fetch_error": None,
    },
    models.AuditLogRow: {
        "id": ROW_ID,
        "user_id": USER_ID,
        "action": "a2a.inbound",
        "details_json": {"method": "SendMessage", "status": 200},
        "ip_address": "203.0.113.7",
        "created_at": NOW,
    },
}

ALL_MODELS = list(EXAMPLES)


def _wire_names(model: type[BaseModel]) -> dict[str, str]:
    """Field name on the wire (alias or name) → Python attribute name."""
    return {(info.alias or name): name for name, info in model.model_fields.items()}


def _required_only(model: type[BaseModel], payload: dict[str, Any]) -> dict[str, Any]:
    names = _wire_names(model)
    return {
        key: value for key, value in payload.items() if model.model_fields[names[key]].is_required()
    }


def test_every_model_has_an_example() -> None:
    exported = {
        value
        for value in vars(models).values()
        if isinstance(value, type) and issubclass(value, models.ConferModel)
    }
    assert exported - {models.ConferModel} == set(ALL_MODELS)


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda model: model.__name__)
def test_example_parses_with_every_field(model: type[BaseModel]) -> None:
    payload = EXAMPLES[model]
    assert set(payload) == set(_wire_names(model)), "the example must set every field"
    model.model_validate(payload)


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda model: model.__name__)
def test_round_trip_through_json_keeps_wire_names(model: type[BaseModel]) -> None:
    parsed = model.model_validate_json(json.dumps(EXAMPLES[model]))
    dumped = parsed.model_dump_json()
    assert json.loads(dumped) == EXAMPLES[model]
    assert model.model_validate_json(dumped) == parsed


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda model: model.__name__)
def test_optional_fields_default_to_none(model: type[BaseModel]) -> None:
    optional = [name for name, info in model.model_fields.items() if not info.is_required()]
    for name in optional:
        assert model.model_fields[name].default is None, f"{model.__name__}.{name}"
    parsed = model.model_validate(_required_only(model, EXAMPLES[model]))
    assert all(getattr(parsed, name) is None for name in optional)


def test_python_names_for_reserved_spec_names() -> None:
    agent = models.Agent.model_validate(EXAMPLES[models.Agent])
    assert agent.model_config_.brain.provider == "anthropic"
    assert "model_config" in agent.model_dump()
    translation = models.Translation(from_="zh", to="en", provider="deepl")
    assert translation.model_dump() == {"from": "zh", "to": "en", "provider": "deepl"}


def test_timestamps_parse_to_aware_datetimes() -> None:
    message = models.Message.model_validate(EXAMPLES[models.Message])
    assert isinstance(message.created_at, datetime)
    assert message.created_at.utcoffset() is not None


# (model, field on the wire, a value of the right type outside the Literal)
BAD_ENUM_VALUES = [
    (models.Agent, "style", "grumpy"),
    (models.PolicyConfig, "default", "allow"),
    (models.PolicyRule, "action", "delete"),
    (models.PolicyRule, "effect", "maybe"),
    (models.Message, "sender_type", "robot"),
    (models.Message, "content_type", "html"),
    (models.Message, "via", "fax"),
    (models.Citation, "trust_level", "rumour"),
    (models.ConversationRow, "type", "bogus"),
    (models.ParticipantRow, "participant_type", "admin"),
    (models.ParticipantRow, "role", "owner"),
    (models.PermissionRow, "level", "L4"),
    (models.PermissionRow, "decision", "allow"),
    (models.PermissionRow, "decision_scope", "everyone"),
]


@pytest.mark.parametrize(
    ("model", "field", "value"),
    BAD_ENUM_VALUES,
    ids=[f"{model.__name__}.{field}" for model, field, _ in BAD_ENUM_VALUES],
)
def test_values_outside_an_enumeration_are_rejected(
    model: type[BaseModel], field: str, value: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate({**EXAMPLES[model], field: value})
    assert [error["loc"] for error in caught.value.errors()] == [(field,)]


# (model, field on the wire, a value of the wrong type or shape)
WRONG_TYPES = [
    (models.User, "id", "not-a-ulid"),
    (models.User, "id", USER_ID.lower()),
    (models.User, "created_at", "2026-01-02T03:04:05"),  # naive: TIMESTAMPTZ needs a zone
    (models.User, "llm_keys", {"anthropic": 42}),
    (models.UserPreferences, "notification", {"push": True}),
    (models.Agent, "is_public", "sometimes"),
    (models.Agent, "capabilities", {"type": "qa"}),
    (models.Capability, "scope", "docs"),
    (models.ModelChoice, "temperature", "hot"),
    (models.Citation, "page", "twelve"),
    (models.Message, "citations", [{"source": "x"}]),
    (models.PeerContactRow, "tags", "work"),
    (models.ProjectMemoryRow, "version", 1.5),
    (models.SessionRow, "expires_at", "tomorrow"),
    (models.AttachmentRow, "size_bytes", "big"),
    (models.AuditLogRow, "ip_address", "not-an-ip"),
]


@pytest.mark.parametrize(
    ("model", "field", "value"),
    WRONG_TYPES,
    ids=[
        f"{model.__name__}.{field}-{index}" for index, (model, field, _) in enumerate(WRONG_TYPES)
    ],
)
def test_values_of_the_wrong_type_are_rejected(
    model: type[BaseModel], field: str, value: Any
) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate({**EXAMPLES[model], field: value})
    assert all(error["loc"][0] == field for error in caught.value.errors())


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda model: model.__name__)
def test_unknown_fields_are_rejected(model: type[BaseModel]) -> None:
    with pytest.raises(ValidationError, match="extra_forbidden"):
        model.model_validate({**EXAMPLES[model], "surprise": 1})


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda model: model.__name__)
def test_required_fields_are_required(model: type[BaseModel]) -> None:
    for key in _required_only(model, EXAMPLES[model]):
        payload = {k: v for k, v in EXAMPLES[model].items() if k != key}
        with pytest.raises(ValidationError, match="missing"):
            model.model_validate(payload)


# Literal alias → how the spec lists its values: a "column: a b c" line under a table, or a
# TypeScript union "field: 'a' | 'b'" in an interface.
SPEC_LISTS: dict[str, Any] = {
    "type": models.ConversationType,
    "participant_type": models.ParticipantType,
    "role": models.ParticipantRole,
    "sender_type": models.SenderType,
    "content_type": models.ContentType,
    "level": models.PermissionLevel,
    "decision": models.PermissionDecision,
    "decision_scope": models.DecisionScope,
}
SPEC_UNIONS: dict[str, Any] = {
    "style": models.AgentStyle,
    "default": models.PolicyDefault,
    "action": models.PolicyAction,
    "effect": models.PolicyEffect,
    "sender_type": models.SenderType,
    "via": models.Via,
    "trust_level": models.CitationTrustLevel,
}


def test_enumerations_are_the_spec_values() -> None:
    if not SEED_PATH.exists():
        pytest.skip(f"data model spec not found at {SEED_PATH}")
    seed = SEED_PATH.read_text(encoding="utf-8")
    for column, alias in SPEC_LISTS.items():
        match = re.search(rf"^{column}: ([\w ]+?)\s*$", seed, re.MULTILINE)
        assert match, f"no '{column}:' value list in the spec"
        assert get_args(alias) == tuple(match.group(1).split()), column
    for field, alias in SPEC_UNIONS.items():
        match = re.search(rf"^\s+{field}\??: ('[^;]*);", seed, re.MULTILINE)
        assert match, f"no '{field}' union in the spec"
        assert get_args(alias) == tuple(re.findall(r"'([^']*)'", match.group(1))), field


def test_models_import_nothing_from_confer() -> None:
    code = (
        "import sys, models; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'gateway', 'a2a', 'did'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
