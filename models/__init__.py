"""Pydantic types of Confer's data model, for the API and for database rows.

Source: the data model spec ("Confer — Modelo de datos"). Interfaces of the spec keep their names
(``User``, ``Agent``, ``Message`` …) and field names; tables without an interface have a ``…Row``
type with one field per column. The string unions of the spec are ``Literal`` aliases; those that
are columns are also CHECK constraints in ``alembic/versions/0001_data_model.py``.

This package imports nothing else from Confer.
"""

from .agents import (
    Agent,
    AgentStyle,
    Capability,
    ModelChoice,
    ModelConfig,
    PolicyAction,
    PolicyConfig,
    PolicyDefault,
    PolicyEffect,
    PolicyRule,
)
from .audit import AuditLogRow
from .base import ConferModel, Timestamp, Ulid
from .conversations import (
    ConversationRow,
    ConversationType,
    ParticipantRole,
    ParticipantRow,
    ParticipantType,
    ThreadRow,
)
from .memory import ProjectMemoryRow
from .messages import (
    AttachmentRow,
    Citation,
    CitationTrustLevel,
    ContentType,
    Message,
    SenderType,
    Translation,
    Via,
)
from .peers import PeerAgentRow, PeerContactRow
from .permissions import DecisionScope, PermissionDecision, PermissionLevel, PermissionRow
from .sessions import SessionRow
from .users import (
    EncryptedKey,
    LLMKeys,
    NotificationPreferences,
    PrivacyPreferences,
    User,
    UserPreferences,
)

__all__ = [
    "Agent",
    "AgentStyle",
    "AttachmentRow",
    "AuditLogRow",
    "Capability",
    "Citation",
    "CitationTrustLevel",
    "ConferModel",
    "ContentType",
    "ConversationRow",
    "ConversationType",
    "DecisionScope",
    "EncryptedKey",
    "LLMKeys",
    "Message",
    "ModelChoice",
    "ModelConfig",
    "NotificationPreferences",
    "ParticipantRole",
    "ParticipantRow",
    "ParticipantType",
    "PeerAgentRow",
    "PeerContactRow",
    "PermissionDecision",
    "PermissionLevel",
    "PermissionRow",
    "PolicyAction",
    "PolicyConfig",
    "PolicyDefault",
    "PolicyEffect",
    "PolicyRule",
    "PrivacyPreferences",
    "ProjectMemoryRow",
    "SenderType",
    "SessionRow",
    "ThreadRow",
    "Timestamp",
    "Translation",
    "Ulid",
    "User",
    "UserPreferences",
    "Via",
]
