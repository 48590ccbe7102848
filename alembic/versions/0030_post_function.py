"""A user's post in one round trip: the function ``confer_post_message``.

A post locks its conversation's row, checks the poster may post, claims the message's id on the
conversation's head and inserts the message, all in one statement; then it reads who takes
part, to append the event to their streams and queue the message for peers. That read must
come after the lock: in READ COMMITTED a statement sees what had committed when it started, so
one statement that also waited for the lock would miss a participant added by the transaction
that held it. A PL/pgSQL function (VOLATILE) takes a fresh snapshot for each statement in it:
this one runs the post's statement, then, when it stored the message, the participants' read,
and returns both, so the two cost one round trip instead of two.

``confer_post_message(id, conversation_id, sender_type, sender_id, sender_did, content_type,
content, content_json, in_reply_to, via, citations_json, language, translation_json)``
returns one row: the conversation (``c_id`` … ``c_archived_at``, NULL when the sender takes
no part in it), the sender's ``c_role``, ``c_reply_ok`` (``in_reply_to`` is NULL or a visible
message of the conversation), the stored message's columns (NULL when refused: archived, an
observer, a reply to another conversation's message; nothing is written then) and its
``participants`` (NULL when refused), an array of ``confer_post_participant``, by join order:
each participant with its DID, display name, avatar, endpoint, whether the account behind it
was deleted, and for a local user its message request in the conversation and its
``privacy.message_requests`` preference (what ``list_participants(…, with_requests=True)``
of ``gateway.store.conversations`` reads).

The id is a candidate: when the conversation's head is not below it, the message gets the id
right after the head's (the last digit that is not ``Z`` one up, the ``Z``s after it ``0``),
so ids follow commit order within a conversation.

Revision ID: 0030
Revises: 0029
"""

from __future__ import annotations

from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

UPGRADE = (
    """
    CREATE TYPE confer_post_participant AS (
      id                 TEXT,
      participant_type   TEXT,
      user_id            TEXT,
      agent_id           TEXT,
      peer_id            TEXT,
      role               TEXT,
      joined_at          TIMESTAMPTZ,
      did                TEXT,
      name               TEXT,
      avatar_url         TEXT,
      endpoint           TEXT,
      deleted            BOOLEAN,
      requests_pref      BOOLEAN,
      request_sender_did TEXT,
      request_state      TEXT,
      request_created_at TIMESTAMPTZ,
      request_decided_at TIMESTAMPTZ
    )
    """,
    """
    CREATE FUNCTION confer_post_message(
      _id CHAR(26), _conversation_id CHAR(26), _sender_type TEXT, _sender_id CHAR(26),
      _sender_did TEXT, _content_type TEXT, _content TEXT, _content_json JSONB,
      _in_reply_to CHAR(26), _via TEXT, _citations_json JSONB, _language TEXT,
      _translation_json JSONB,
      OUT c_id TEXT, OUT c_type TEXT, OUT c_name TEXT, OUT c_created_by TEXT,
      OUT c_created_at TIMESTAMPTZ, OUT c_updated_at TIMESTAMPTZ, OUT c_archived_at TIMESTAMPTZ,
      OUT c_role TEXT, OUT c_reply_ok BOOLEAN,
      OUT id TEXT, OUT conversation_id TEXT, OUT sender_type TEXT, OUT sender_id TEXT,
      OUT sender_did TEXT, OUT content_type TEXT, OUT content TEXT, OUT content_json JSONB,
      OUT in_reply_to TEXT, OUT thread_root TEXT, OUT citations_json JSONB, OUT language TEXT,
      OUT translation_json JSONB, OUT via TEXT, OUT created_at TIMESTAMPTZ,
      OUT participants confer_post_participant[]
    ) LANGUAGE plpgsql VOLATILE AS $$
    #variable_conflict use_column
    BEGIN
      -- The conversation's row is locked first, then its head: the order every writer takes
      -- them in, so concurrent writers cannot deadlock.
      WITH conv AS (
        SELECT c.id, c.type, c.name, c.created_by, c.created_at, c.updated_at, c.archived_at,
               p.role
        FROM conversations c
        JOIN conversation_participants p ON p.conversation_id = c.id AND p.user_id = _sender_id
        WHERE c.id = _conversation_id
        ORDER BY p.id LIMIT 1
        FOR UPDATE OF c FOR SHARE OF p
      ), reply AS (
        SELECT COALESCE(m.thread_root, m.id) AS root FROM messages m
        WHERE m.id = _in_reply_to AND m.conversation_id = _conversation_id
          AND m.deleted_at IS NULL
      ), allowed AS (
        SELECT id FROM conv
        WHERE archived_at IS NULL AND role IS DISTINCT FROM 'observer'
          AND (_in_reply_to IS NULL OR EXISTS (SELECT 1 FROM reply))
      ), head AS (
        INSERT INTO conversation_heads AS h (conversation_id, last_message_id)
        SELECT id, _id FROM allowed
        ON CONFLICT (conversation_id) DO UPDATE SET last_message_id = CASE
          WHEN h.last_message_id < EXCLUDED.last_message_id THEN EXCLUDED.last_message_id
          ELSE (left(rtrim(h.last_message_id::text, 'Z'), -1)
                || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ',
                          strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZ',
                                 right(rtrim(h.last_message_id::text, 'Z'), 1)) + 1, 1)
                || repeat('0', 26 - length(rtrim(h.last_message_id::text, 'Z'))))::char(26)
          END
        RETURNING last_message_id
      ), stored AS (
        INSERT INTO messages (id, conversation_id, sender_type, sender_id, sender_did,
                              content_type, content, content_json, in_reply_to,
                              thread_root, via, citations_json, language, translation_json)
        SELECT head.last_message_id, _conversation_id, _sender_type, _sender_id, _sender_did,
               _content_type, _content, _content_json, _in_reply_to,
               (SELECT root FROM reply), _via, _citations_json, _language, _translation_json
        FROM head
        RETURNING id, conversation_id, sender_type, sender_id, sender_did, content_type,
                  content, content_json, in_reply_to, thread_root, citations_json, language,
                  translation_json, via, created_at
      ), touched AS (
        UPDATE conversations
        SET updated_at = GREATEST(clock_timestamp(), updated_at + interval '1 microsecond')
        WHERE id = _conversation_id AND EXISTS (SELECT 1 FROM stored)
      )
      SELECT conv.id, conv.type, conv.name, conv.created_by, conv.created_at, conv.updated_at,
             conv.archived_at, conv.role,
             _in_reply_to IS NULL OR EXISTS (SELECT 1 FROM reply),
             stored.id, stored.conversation_id, stored.sender_type, stored.sender_id,
             stored.sender_did, stored.content_type, stored.content, stored.content_json,
             stored.in_reply_to, stored.thread_root, stored.citations_json, stored.language,
             stored.translation_json, stored.via, stored.created_at
      INTO c_id, c_type, c_name, c_created_by, c_created_at, c_updated_at, c_archived_at,
           c_role, c_reply_ok,
           id, conversation_id, sender_type, sender_id, sender_did, content_type, content,
           content_json, in_reply_to, thread_root, citations_json, language,
           translation_json, via, created_at
      FROM conv LEFT JOIN stored ON true;
      IF id IS NULL THEN
        RETURN;  -- refused (or not a participant): nothing written, nobody to tell
      END IF;
      -- A statement of its own, so a snapshot taken after the lock above: a participant
      -- added by the transaction this post waited for is among them.
      participants := ARRAY(
        SELECT ROW(p.id, p.participant_type, p.user_id, p.agent_id, p.peer_id, p.role,
                   p.joined_at, COALESCE(u.did, a.did, pa.did),
                   COALESCE(u.display_name, u.username, a.name, pp.display_name, pa.name),
                   COALESCE(u.avatar_url, a.avatar_url, pp.avatar_url), pa.endpoint,
                   COALESCE(u.deleted_at, au.deleted_at) IS NOT NULL,
                   (u.preferences_json -> 'privacy' ->> 'message_requests')::boolean,
                   mr.sender_did, mr.state, mr.created_at, mr.decided_at
               )::confer_post_participant
        FROM conversation_participants p
        LEFT JOIN users u ON u.id = p.user_id
        LEFT JOIN agents a ON a.id = p.agent_id
        LEFT JOIN users au ON au.id = a.user_id
        LEFT JOIN peer_agents pa ON pa.id = p.peer_id
        LEFT JOIN peer_profiles pp ON pp.peer_id = p.peer_id
        LEFT JOIN message_requests mr
          ON mr.conversation_id = p.conversation_id AND mr.user_id = p.user_id
        WHERE p.conversation_id = _conversation_id ORDER BY p.id);
    END
    $$
    """,
)

DOWNGRADE = (
    "DROP FUNCTION confer_post_message",
    "DROP TYPE confer_post_participant",
)


def upgrade() -> None:
    """Create the participant type and the function."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop the function and its type."""
    for statement in DOWNGRADE:
        op.execute(statement)
