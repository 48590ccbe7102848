"""Outgoing e-mail over SMTP (``aiosmtplib``): notifications and password-reset mail.

Configured by ``CONFER_SMTP_*``; without ``smtp_host`` there is no e-mail (``configured`` is
False). ``smtp_tls`` picks the transport: ``starttls`` (RFC 3207 upgrade, required — a server
that does not offer it is an error, never a silent plain-text fallback), ``tls`` (implicit TLS,
RFC 8314) or ``none`` (a relay on loopback). ``send`` raises on failure; ``send_soon`` sends in
the background so that a caller's answer does not depend on whether mail was sent (the
password-reset request), keeping its tasks until they end and logging their failures.
"""

from __future__ import annotations

import asyncio
import logging
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from urllib.parse import urlsplit

from gateway.settings import Settings

log = logging.getLogger(__name__)


class MailRefusedError(Exception):
    """The SMTP server refused the message (or the session), e.g. no STARTTLS offered."""


MailError = (MailRefusedError, OSError, TimeoutError)
"""What a failed send raises: the SMTP server refused, or could not be reached in time."""


class Mailer:
    """Sends plain-text mail through the configured SMTP server."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        host = urlsplit(settings.public_url).hostname or "localhost"
        self.sender = settings.smtp_from or f"confer@{host}"
        self._pending: set[asyncio.Task[None]] = set()

    @property
    def configured(self) -> bool:
        """True when an SMTP server is set."""
        return bool(self._settings.smtp_host)

    def message(self, to: str, subject: str, text: str) -> EmailMessage:
        """A plain-text UTF-8 message from :attr:`sender` to ``to``."""
        message = EmailMessage()
        message["From"] = self.sender
        message["To"] = to
        message["Subject"] = subject
        message["Date"] = formatdate(localtime=False)
        message["Message-ID"] = make_msgid(domain=self.sender.rpartition("@")[2] or None)
        message["Auto-Submitted"] = "auto-generated"  # RFC 3834 §5: no auto-replies, please
        message.set_content(text)
        return message

    async def send(self, to: str, subject: str, text: str) -> None:
        """Send one message. Raises one of :data:`MailError` when it was not accepted."""
        s = self._settings
        if not s.smtp_host:
            raise RuntimeError("no SMTP server configured")
        import aiosmtplib  # on first use: serving without mail never loads it

        try:
            await aiosmtplib.send(
                self.message(to, subject, text),
                hostname=s.smtp_host,
                port=s.smtp_port,
                username=s.smtp_username,
                password=s.smtp_password,
                use_tls=s.smtp_tls == "tls",
                start_tls=s.smtp_tls == "starttls",
                timeout=s.smtp_timeout_seconds,
            )
        except aiosmtplib.SMTPException as exc:
            if isinstance(exc, OSError | TimeoutError):
                raise  # aiosmtplib's connect and timeout errors are these already
            raise MailRefusedError(str(exc)) from exc

    def send_soon(self, to: str, subject: str, text: str) -> None:
        """Send in the background; a failure is logged, never raised to the caller."""
        task = asyncio.get_running_loop().create_task(self._send_logged(to, subject, text))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _send_logged(self, to: str, subject: str, text: str) -> None:
        try:
            await self.send(to, subject, text)
        except MailError:
            log.warning("mail %r could not be sent", subject, exc_info=True)

    async def aclose(self) -> None:
        """Wait for the background sends (each bounded by ``smtp_timeout_seconds``)."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
