"""aiosmtpd handlers for e-mail tests with a real SMTP server (on `tests.support.net.free_port`)."""

from __future__ import annotations


class FlakySMTP:
    """An aiosmtpd handler that answers 451 (try again later) to the first message."""

    def __init__(self, failures: int = 1):
        self.failures = failures
        self.received: list[bytes] = []

    async def handle_DATA(self, server, session, envelope):
        if self.failures > 0:
            self.failures -= 1
            return "451 4.3.0 Temporarily unable to accept mail"
        self.received.append(envelope.content)
        return "250 OK"
