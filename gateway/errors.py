"""One error tree: every error Confer raises on purpose, each class with a stable wire ``code``.

This module imports no web framework and no database driver, so every layer may raise these.
How each class reaches a client — HTTP status and RFC 9457 problem details, or a WebSocket
close code — is one table at the edge, :mod:`gateway.http_errors`. The ``a2a`` and ``did``
libraries raise their own errors (:class:`a2a.errors.A2AError`,
:class:`did.errors.DIDError`); the edge maps those too.

The hierarchy (wire code in brackets)::

    ConferError [internal_error]
      BadRequestError [bad_request]
        MalformedJSONError [malformed_json]
        OAuthClientInvalidError [oauth_client_invalid]
        ResetTokenInvalidError [reset_token_invalid]
      ValidationFailedError [validation_failed]
        IdempotencyKeyReusedError [idempotency_key_reused]
        UsernameInvalidError [validation_failed]
        FieldInvalidError [validation_failed]
        PushSubscriptionInvalidError [push_subscription_invalid]
        GroupTooLargeError [group_too_large]
        RetentionTooLongError [retention_too_long]
      PayloadTooLargeError [payload_too_large]
        AttachmentQuotaExceededError [attachment_quota_exceeded]
      AuthenticationError [unauthorized]
        InvalidCredentialsError [invalid_credentials]
        TokenInvalidError [token_invalid]
        FederationAuthError [federation_unauthorized]
        RefreshTokenInvalidError [refresh_token_invalid]
        ApiKeyInvalidError [api_key_invalid]
      ForbiddenError [forbidden]
        NotConversationAdminError [not_conversation_admin]
        ObserverCannotPostError [observer_cannot_post]
        NotMessageAuthorError [not_message_author]
        AccountDisabledError [account_disabled]
        AdminRequiredError [admin_required]
        ApiKeyScopeError [api_key_scope]
        AgentNotReachableError [agent_not_reachable]
        PeerBlockedError [peer_blocked]
        NotGroupMemberError [not_group_member]
        AttachmentForbiddenError [attachment_forbidden]
        FederationRefusedError [federation_refused]
      NotFoundError [not_found]
        ConversationNotFoundError [conversation_not_found]
        RecipientNotFoundError [recipient_not_found]
        UserNotFoundError [user_not_found]
        ParticipantNotFoundError [participant_not_found]
        MessageNotFoundError [message_not_found]
        AttachmentNotFoundError [attachment_not_found]
        ThreadNotFoundError [thread_not_found]
        AgentNotFoundError [agent_not_found]
        MemoryNotFoundError [memory_not_found]
        KnowledgeNotFoundError [knowledge_not_found]
        ConceptNotFoundError [concept_not_found]
        ProjectMemoryNotFoundError [project_memory_not_found]
        SessionNotFoundError [session_not_found]
        OAuthRequestNotFoundError [oauth_request_not_found]
        PushSubscriptionNotFoundError [push_subscription_not_found]
        LLMKeyNotFoundError [llm_key_not_found]
        ApiKeyNotFoundError [api_key_not_found]
        ContactNotFoundError [contact_not_found]
        PermissionNotFoundError [permission_not_found]
        DestinationNotFoundError [destination_not_found]
      ConflictError [conflict]
        UsernameTakenError [username_taken]
        ConversationArchivedError [conversation_archived]
        NotAGroupError [not_a_group]
        AlreadyParticipantError [already_participant]
        LastAdminError [last_admin]
        EditConflictError [edit_conflict]
        ThreadExistsError [thread_exists]
        KnowledgeDuplicateError [knowledge_duplicate]
        VersionConflictError [version_conflict]
        EmailTakenError [email_taken]
        PhoneTakenError [phone_taken]
        PermissionDecidedError [permission_decided]
        PermissionExpiredError [permission_expired]
        AttachmentPendingError [attachment_pending]
        AttachmentUnavailableError [attachment_unavailable]
      PeerError [peer_invalid]
      UnsupportedMediaTypeError [unsupported_media_type]
      PreconditionFailedError [precondition_failed]
      PreconditionRequiredError [precondition_required]
      RateLimitedError [rate_limited]
        TooManyConnectionsError [too_many_connections]
      EncryptionNotConfiguredError [encryption_not_configured]
      EncryptionKeyError [encryption_key_error]
      ServiceUnavailableError [service_unavailable]
        NotConfiguredError [not_configured]
        DatabaseBusyError [database_busy]
        StorageUnavailableError [storage_unavailable]
      TranslationFailedError [translation_failed]
      BackupError [backup_failed]
        BackupArchiveError [backup_archive_invalid]
        RestoreTargetNotEmptyError [restore_target_not_empty]
      NothingToTranslateError [nothing_to_translate]
      OAuthError [the RFC 6749 error: invalid_grant, invalid_target…]  (OAuth JSON, not RFC 9457)
      PublicURLChangedError [public_url_changed]  (start-up only: the gateway refuses to start)
"""

from __future__ import annotations

from typing import Any, ClassVar


class ConferError(Exception):
    """Base of every deliberate error.

    ``code`` is the stable, documented wire code of the class; ``wire_code`` is the code this
    instance reports (the class's, unless the raiser names a finer one). ``title`` is the
    short human summary, ``detail`` says what happened this time, and ``extra`` holds further
    members of the problem details body (``errors``, ``retry_after``).
    """

    code: ClassVar[str] = "internal_error"
    title: ClassVar[str] = "Internal error"

    def __init__(self, detail: str | None = None, **extra: Any) -> None:
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        self.extra = extra
        self.wire_code = self.code


class BadRequestError(ConferError):
    code, title = "bad_request", "Bad request"


class MalformedJSONError(BadRequestError):
    code, title = "malformed_json", "The request body is not valid JSON"


class ValidationFailedError(ConferError):
    code, title = "validation_failed", "The request is not valid"


class GroupTooLargeError(ValidationFailedError):
    """A group beyond ``CONFER_MAX_GROUP_MEMBERS``, or one request naming more remote DIDs of
    one host than it may fetch (every remote DID is a DID document fetch)."""

    code, title = "group_too_large", "The group has too many participants"


class RetentionTooLongError(ValidationFailedError):
    """A conversation's retention longer than the instance's ``CONFER_MESSAGE_RETENTION_DAYS``
    (a conversation may only shorten it)."""

    code, title = "retention_too_long", "The retention is longer than this instance keeps"


class PayloadTooLargeError(ConferError):
    code, title = "payload_too_large", "The request body is too large"


class AttachmentQuotaExceededError(PayloadTooLargeError):
    """An upload that would take the uploader's stored uploads past
    ``CONFER_ATTACHMENT_QUOTA_BYTES``. 413, like the per-file cap, not WebDAV's 507: the
    limit is the caller's, not the server running out of room, and a 5xx would be retried by
    clients and counted as a server fault by monitoring."""

    code, title = "attachment_quota_exceeded", "Your attachment storage quota is used up"


class AuthenticationError(ConferError):
    code, title = "unauthorized", "Authentication required"


class InvalidCredentialsError(AuthenticationError):
    code, title = "invalid_credentials", "Wrong username or password"


class TokenInvalidError(AuthenticationError):
    code, title = "token_invalid", "The access token is not valid"


class FederationAuthError(AuthenticationError):
    """A signed server-to-server request failed authentication (RFC 9421 §3.2)."""

    code, title = "federation_unauthorized", "The federation request is not authenticated"

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.wire_code = code


class ForbiddenError(ConferError):
    code, title = "forbidden", "Not allowed"


class NotFoundError(ConferError):
    code, title = "not_found", "Not found"


class ConversationNotFoundError(NotFoundError):
    code, title = "conversation_not_found", "No such conversation"


class RecipientNotFoundError(NotFoundError):
    code, title = "recipient_not_found", "No such user or agent on this instance"


class UserNotFoundError(NotFoundError):
    code, title = "user_not_found", "No such user"


class DestinationNotFoundError(NotFoundError):
    code, title = "destination_not_found", "No such federation destination"


class ConflictError(ConferError):
    code, title = "conflict", "Conflict"


class UsernameTakenError(ConflictError):
    code, title = "username_taken", "That username is taken"


class PeerError(ConferError):
    """A peer (DID) supplied by our user cannot be used."""

    code, title = "peer_invalid", "The peer cannot be used"

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.wire_code = code


class NotConversationAdminError(ForbiddenError):
    code, title = "not_conversation_admin", "Only the conversation's admins may do that"


class ObserverCannotPostError(ForbiddenError):
    code, title = "observer_cannot_post", "Observers read but cannot post"


class AgentPolicyDeniedError(ForbiddenError):
    """The agent's policy (or its owner's contact rules) refuses this user, as it would a
    peer: nothing is stored."""

    code, title = "agent_policy_denied", "The agent's policy refuses this request"


class ConversationArchivedError(ConflictError):
    code, title = "conversation_archived", "The conversation is archived (read-only)"


class NotAGroupError(ConflictError):
    code, title = "not_a_group", "Participants can only be added to or removed from a group"


class AlreadyParticipantError(ConflictError):
    code, title = "already_participant", "Already a participant"


class LastAdminError(ConflictError):
    code, title = "last_admin", "A group keeps at least one admin"


class PeerNotFoundError(NotFoundError):
    code, title = "peer_not_found", "No such peer"


class ParticipantNotFoundError(NotFoundError):
    code, title = "participant_not_found", "No such participant in this conversation"


class MessageNotFoundError(NotFoundError):
    code, title = "message_not_found", "No such message"


class NotMessageAuthorError(ForbiddenError):
    code, title = "not_message_author", "Only the author may change this message"


class EditConflictError(ConflictError):
    code, title = "edit_conflict", "The message changed since that version"


class IdempotencyKeyReusedError(ValidationFailedError):
    code, title = "idempotency_key_reused", "The Idempotency-Key was used for another request"


class AttachmentNotFoundError(NotFoundError):
    code, title = "attachment_not_found", "No such attachment"


class AttachmentPendingError(ConflictError):
    """A peer's file whose bytes are still being fetched from the sender's instance."""

    code, title = "attachment_pending", "The file is still on its way from the sender's instance"


class AttachmentUnavailableError(ConflictError):
    """A peer's file that could not be fetched (refused, too large, hash mismatch)."""

    code, title = "attachment_unavailable", "The file could not be fetched from its sender"


class ThreadNotFoundError(NotFoundError):
    code, title = "thread_not_found", "No such thread"


class ThreadExistsError(ConflictError):
    code, title = "thread_exists", "That message already roots an archived thread"


class UnsupportedMediaTypeError(ConferError):
    code, title = "unsupported_media_type", "Unsupported media type"


# --- the own agent's context: memories, knowledge, project memory ---


class AgentNotFoundError(NotFoundError):
    code, title = "agent_not_found", "No such agent of yours"


class MemoryNotFoundError(NotFoundError):
    code, title = "memory_not_found", "No such memory"


class KnowledgeNotFoundError(NotFoundError):
    code, title = "knowledge_not_found", "No such knowledge entry"


class ConceptNotFoundError(NotFoundError):
    code, title = "concept_not_found", "No such concept in your concept memory"


class KnowledgeDuplicateError(ConflictError):
    code, title = "knowledge_duplicate", "The same content is already in your knowledge base"


class ProjectMemoryNotFoundError(NotFoundError):
    code, title = "project_memory_not_found", "No project memory for this project and peer"


class VersionConflictError(ConflictError):
    """A write named a version that is no longer current (``If-Match`` on a stale version)."""

    code, title = "version_conflict", "The document changed since you read it"


class PreconditionFailedError(ConferError):
    code, title = "precondition_failed", "The If-Match version does not match"


class PreconditionRequiredError(ConferError):
    code, title = "precondition_required", "Send If-Match with the version you read"


class UsernameInvalidError(ValidationFailedError):
    """A username breaks the rules of ``gateway.services.usernames`` (422, names the field)."""

    title = "The username cannot be used"

    def __init__(self, detail: str, *, field: str = "username") -> None:
        super().__init__(
            detail, errors=[{"loc": ["body", field], "msg": detail, "type": "username_invalid"}]
        )


class FieldInvalidError(ValidationFailedError):
    """One field (``loc`` as pydantic gives it: ``["body", "email"]``) holds a value the service
    refuses (422, same shape as pydantic's errors)."""

    def __init__(self, loc: list[str | int], detail: str, kind: str = "value_error") -> None:
        path = ".".join(str(p) for p in loc)
        super().__init__(
            f"invalid fields: {path}: {detail}",
            errors=[{"loc": list(loc), "msg": detail, "type": kind}],
        )


class EmailTakenError(ConflictError):
    code, title = "email_taken", "That email address belongs to another account"


class PhoneTakenError(ConflictError):
    code, title = "phone_taken", "That phone number belongs to another account"


class RefreshTokenInvalidError(AuthenticationError):
    code, title = "refresh_token_invalid", "The refresh token is not valid"


class AccountDisabledError(ForbiddenError):
    code, title = "account_disabled", "This account has been disabled by an administrator"


class AdminRequiredError(ForbiddenError):
    code, title = "admin_required", "Only administrators may do this"


class RateLimitedError(ConferError):
    """Too many attempts; ``Retry-After`` (RFC 9110 §10.2.3) says when to try again."""

    code, title = "rate_limited", "Too many requests"

    def __init__(self, detail: str, *, retry_after: int) -> None:
        super().__init__(detail, retry_after=retry_after)
        self.headers = {"Retry-After": str(retry_after)}


class TooManyConnectionsError(RateLimitedError):
    """A user already holds ``CONFER_WS_MAX_CONNECTIONS_PER_USER`` WebSocket connections on
    this process (the route counts every process first when presence is shared); the new one
    is closed with 4029 (``docs/websocket.md``)."""

    code, title = "too_many_connections", "Too many WebSocket connections"


class SessionNotFoundError(NotFoundError):
    code, title = "session_not_found", "No such session"


class LLMKeyNotFoundError(NotFoundError):
    code, title = "llm_key_not_found", "No key is stored for that provider"


class EncryptionNotConfiguredError(ConferError):
    code = "encryption_not_configured"
    title = "CONFER_ENCRYPTION_KEYS is not set; LLM keys cannot be stored"


class EncryptionKeyError(ConferError):
    """Stored ciphertext cannot be decrypted: its key id is unknown, or the key is wrong, or
    the data was tampered with. An operator problem, never returned as garbage."""

    code, title = "encryption_key_error", "Stored secret cannot be decrypted"


class ApiKeyNotFoundError(NotFoundError):
    code, title = "api_key_not_found", "No such API key"


class ApiKeyInvalidError(AuthenticationError):
    code, title = "api_key_invalid", "The API key is not valid or was revoked"


class ApiKeyScopeError(ForbiddenError):
    code, title = "api_key_scope", "API keys may call this user's agents and public agents only"


class ContactNotFoundError(NotFoundError):
    code, title = "contact_not_found", "No such contact"


class AgentNotReachableError(ForbiddenError):
    code, title = "agent_not_reachable", "That agent belongs to another user and is not public"


class PeerBlockedError(ForbiddenError):
    code, title = "peer_blocked", "The recipient does not accept requests from this peer"


class FederationRefusedError(ForbiddenError):
    """The instance federation policy refuses this peer (its domain or DID is denied, or not
    on the allow list): an inbound request is answered with a signed JSON-RPC refusal, an
    outbound delivery fails without being sent, a lookup of the DID is not made."""

    code, title = "federation_refused", "This instance does not federate with that peer"


class AttachmentForbiddenError(ForbiddenError):
    """A signed fetch of an attachment by an instance with no participant in its conversation
    (or of no such attachment: the two are not told apart)."""

    code, title = "attachment_forbidden", "This instance may not fetch that attachment"


class PermissionNotFoundError(NotFoundError):
    code, title = "permission_not_found", "No such permission request"


class PermissionDecidedError(ConflictError):
    code, title = "permission_decided", "The permission request was already decided"


class PermissionExpiredError(ConflictError):
    code, title = "permission_expired", "The permission request expired and was denied"


class ServiceUnavailableError(ConferError):
    code, title = "service_unavailable", "A backing service is unavailable"


class DatabaseBusyError(ServiceUnavailableError):
    """The database could not serve in time: no pool connection came free within the acquire
    timeout, or a statement ran past ``statement_timeout``. Nothing was done that the caller
    must undo; ``Retry-After`` (RFC 9110 §10.2.3) says when to try again."""

    code, title = "database_busy", "The database is busy"

    def __init__(self, detail: str, *, retry_after: int = 2) -> None:
        super().__init__(detail, retry_after=retry_after)
        self.headers = {"Retry-After": str(retry_after)}


class StorageUnavailableError(ServiceUnavailableError):
    """The attachment store (an S3-compatible service) did not answer or refused the call;
    the detail a client sees is generic, the store's own answer is logged."""

    code, title = "storage_unavailable", "The attachment storage is unavailable"


class BackendUnavailableError(ServiceUnavailableError):
    """A configured backing service (Redis ``CONFER_REDIS_URL``, NATS ``CONFER_NATS_URL``,
    the database) does not answer: at start-up the process refuses to start with this
    detail; for a request, nothing was done and ``Retry-After`` (RFC 9110 §10.2.3) says when
    to try again."""

    code, title = "backend_unavailable", "A backing service does not answer"

    def __init__(self, detail: str, *, retry_after: int = 5) -> None:
        super().__init__(detail, retry_after=retry_after)
        self.headers = {"Retry-After": str(retry_after)}


class TranslationFailedError(ConferError):
    code, title = "translation_failed", "The translation model could not translate"


class BackupError(ConferError):
    """``confer backup`` or ``confer restore`` could not finish (a command-line error: the
    detail is the sentence the operator sees)."""

    code, title = "backup_failed", "The backup or restore failed"


class BackupArchiveError(BackupError):
    """The archive is not a Confer backup, or is damaged (a checksum or a member is wrong)."""

    code, title = "backup_archive_invalid", "The backup archive is not valid"


class RestoreTargetNotEmptyError(BackupError):
    code, title = "restore_target_not_empty", "The database to restore into is not empty"


class NothingToTranslateError(ConferError):
    code, title = "nothing_to_translate", "The message has no text to translate"


class NotGroupMemberError(ForbiddenError):
    code, title = "not_group_member", "The sender is not a member of that group"


class GroupHomeUnreachableError(ConferError):
    """A change of a group homed on another instance is made there; that instance could not
    be reached, or gave an answer that is neither a result nor a refusal. Nothing changed."""

    code, title = "group_home_unreachable", "The group's home instance could not be reached"


class PublicURLChangedError(ConferError):
    """``CONFER_PUBLIC_URL`` gives another instance DID than the stored users': every stored
    did:web DID would be wrong (did:web §3.1), so the gateway refuses to start."""

    code, title = "public_url_changed", "The public URL changed"


class OAuthClientInvalidError(BadRequestError):
    """An authorization request whose client or redirect URI cannot be trusted: the error is
    shown to the user, never sent to the redirect URI (RFC 6749 §4.1.2.1)."""

    code, title = "oauth_client_invalid", "Unknown OAuth client or redirect URI"


class OAuthRequestNotFoundError(NotFoundError):
    code, title = "oauth_request_not_found", "No such pending authorization request"


class OAuthError(ConferError):
    """An OAuth 2.0 protocol error at the token, registration or revocation endpoint.

    ``error`` is the protocol's code (RFC 6749 §5.2 ``invalid_grant``, ``invalid_request``…,
    RFC 8707 §2 ``invalid_target``, RFC 7591 §3.2.2 ``invalid_client_metadata``), answered as
    ``{"error", "error_description"}`` JSON with ``status`` because OAuth clients read that shape.
    """

    code, title = "oauth_error", "OAuth request refused"

    def __init__(self, error: str, detail: str, *, status: int = 400) -> None:
        super().__init__(detail)
        self.error = error
        self.status = status
        self.wire_code = error


class PushSubscriptionInvalidError(ValidationFailedError):
    """A push subscription Confer cannot use: an endpoint that is not an https URL or that
    the outbound address policy refuses, or keys that are not RFC 8291 keys (422)."""

    code, title = "push_subscription_invalid", "The push subscription cannot be used"


class PushSubscriptionNotFoundError(NotFoundError):
    code, title = "push_subscription_not_found", "This session has no push subscription"


class ResetTokenInvalidError(BadRequestError):
    """A password-reset token that is unknown, expired or already used (not told apart)."""

    code, title = "reset_token_invalid", "The reset token is invalid or has expired"


class NotConfiguredError(ServiceUnavailableError):
    """A feature the operator has not configured (Web Push off, no SMTP server)."""

    code, title = "not_configured", "This instance has not configured that feature"
