"""Small helpers shared by the agent-runtime tests."""

from __future__ import annotations

from tests.gateway.harness import User


def agent_id(user: User) -> str:
    """The id of ``user``'s main agent (the last segment of its did:web)."""
    return str(user.profile["agent_did"]).rsplit(":", 1)[-1]
