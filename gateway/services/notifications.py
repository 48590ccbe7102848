"""What a user away from the screen is told: which queued messages count, and the words.

The notification worker hands :func:`compose` a user and the messages queued for them since
the last notification (``store.notifications.PendingMessage``); it returns one
:class:`Digest` for the whole burst, or None when nothing in it should notify:

- Only conversation content notifies: text, code, files, citations and permission requests
  (``content_type``); system notices and tool traffic do not.
- A message from a muted contact never notifies (``peer_contacts.muted``).
- The user's setting for the conversation (``conversation_participants.notification``):
  ``all``; ``mentions`` — only messages that mention the user (``@username`` as a whole word,
  or the user's DID) or reply to one of the user's messages, and permission requests, which are
  always addressed to the user; ``none`` — nothing.
- ``preferences.privacy.notification_preview`` false: the digest carries no message text and
  no sender or conversation names, only counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gateway.store.notifications import PendingMessage
from models import User

NOTIFYING_CONTENT = frozenset({"text", "code", "file", "citation", "permission_request"})
PREVIEW_CHARS = 200
MAIL_LINES = 20


@dataclass(frozen=True)
class Digest:
    """One notification for a burst: ``title`` and ``body`` for a push, ``lines`` for mail,
    ``count`` messages in ``conversations`` conversations, ``url`` to open."""

    title: str
    body: str
    count: int
    conversations: int
    conversation_id: str | None
    url: str
    lines: tuple[str, ...]

    def push_payload(self) -> dict[str, object]:
        """The JSON object the service worker shows (``web/public/push-sw.js``)."""
        return {
            "title": self.title,
            "body": self.body,
            "count": self.count,
            "conversation_id": self.conversation_id,
            "url": self.url,
            "tag": "confer-messages",
        }


def mentions_user(message: PendingMessage, user: User) -> bool:
    """True when ``message`` is addressed to ``user``: a permission request, a reply to one of
    the user's messages, ``@username`` as a whole word (case-insensitive) or the user's DID."""
    if message.content_type == "permission_request" or message.replied_to_sender == user.id:
        return True
    text = message.content or ""
    pattern = r"(?<![\w@])@" + re.escape(user.username) + r"(?![\w-])"
    return user.did in text or re.search(pattern, text, re.IGNORECASE) is not None


def notifies(message: PendingMessage, user: User) -> bool:
    """Whether ``message`` alone would notify ``user`` (module docstring)."""
    if message.content_type not in NOTIFYING_CONTENT or message.muted:
        return False
    if message.notification == "none":
        return False
    if message.notification == "mentions":
        return mentions_user(message, user)
    return True


def _preview(message: PendingMessage) -> str:
    text = " ".join((message.content or "").split())
    if not text and message.content_type == "file":
        text = "sent a file"
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _where(message: PendingMessage) -> str:
    sender = message.sender_name or "Someone"
    if message.conversation_type == "group" and message.conversation_name:
        return f"{sender} in {message.conversation_name}"
    return sender


def compose(user: User, pending: list[PendingMessage], *, public_url: str) -> Digest | None:
    """One digest of the messages of ``pending`` that notify ``user``, or None."""
    kept = [m for m in pending if notifies(m, user)]
    if not kept:
        return None
    conversations = list(dict.fromkeys(m.conversation_id for m in kept))
    only = conversations[0] if len(conversations) == 1 else None
    url = public_url.rstrip("/") + "/"
    count = len(kept)
    requests = sum(m.content_type == "permission_request" for m in kept)
    if user.preferences.privacy.notification_preview is False:
        if requests == count:
            title = (
                "A permission request is waiting" if count == 1 else f"{count} permission requests"
            )
        else:
            title = "New message" if count == 1 else f"{count} new messages"
        body = "Open Confer to read it." if count == 1 else "Open Confer to read them."
        return Digest("Confer", f"{title}. {body}", count, len(conversations), only, url, ())
    latest = kept[-1]
    lines = tuple(f"{_where(m)}: {_preview(m)}" for m in kept[-MAIL_LINES:])
    if count == 1:
        title = "Permission request" if requests else _where(latest)
        body = _preview(latest)
    else:
        where = f" from {_where(latest)}" if only else f" in {len(conversations)} conversations"
        title = f"{count} new messages{where}"
        body = lines[-1]
    return Digest(title, body, count, len(conversations), only, url, lines)


def mail_text(digest: Digest, *, username: str) -> tuple[str, str]:
    """(subject, plain-text body) of the notification e-mail."""
    subject = f"[Confer] {digest.title}" if digest.title != "Confer" else f"[Confer] {digest.body}"
    parts = [f"Hello {username},", ""]
    if digest.lines:
        parts += [f"{digest.count} new message(s) while you were away:", "", *digest.lines]
    else:
        parts.append(digest.body)
    parts += [
        "",
        f"Open Confer: {digest.url}",
        "",
        "You get this because e-mail notifications are on in your preferences.",
    ]
    return subject, "\n".join(parts) + "\n"
