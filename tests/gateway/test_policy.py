"""Policy evaluation: agent policy merged with contact overrides, shaped by permission level."""

from __future__ import annotations

import pytest

from gateway.services.policy import evaluate
from models.agents import PolicyConfig, PolicyRule
from models.api import ContactPolicyOverrides

PEER = "did:web:peer.example:users:mallory"


def policy(default: str = "ask", *rules: PolicyRule) -> PolicyConfig:
    return PolicyConfig(default=default, rules=list(rules))  # type: ignore[arg-type]


def rule(action: str, effect: str, **kw: str) -> PolicyRule:
    return PolicyRule(action=action, effect=effect, **kw)  # type: ignore[arg-type]


def run(p: PolicyConfig, o: ContactPolicyOverrides | None = None, **kw: str) -> tuple[str, str]:
    values = {"trust_level": "unknown", "peer_did": PEER, "action": "ask", "text": "hello"} | kw
    verdict = evaluate(p, o or ContactPolicyOverrides(), **values)
    return verdict.effect, verdict.level


@pytest.mark.parametrize(
    ("default", "action", "expected"),
    [
        ("auto", "ask", ("allow", "L2")),
        ("ask", "ask", ("ask", "L2")),
        ("deny", "ask", ("deny", "L2")),
        ("ask", "share", ("ask", "L2")),
        ("ask", "read", ("allow", "L1")),  # L1 proceeds (and is logged)
        ("deny", "read", ("deny", "L1")),  # ... unless denied
        ("auto", "commit", ("ask", "L3")),  # L3 always asks
        ("deny", "commit", ("deny", "L3")),
    ],
)
def test_defaults_and_levels(default: str, action: str, expected: tuple[str, str]) -> None:
    assert run(policy(default), action=action) == expected


def test_first_matching_rule_wins_with_peer_and_pattern_globs() -> None:
    p = policy(
        "deny",
        rule("ask", "allow", peer="did:web:peer.example:*", pattern="*invoice*"),
        rule("ask", "ask", peer="did:web:peer.example:*"),
    )
    assert run(p, text="about the invoice") == ("allow", "L2")
    assert run(p, text="something else") == ("ask", "L2")
    assert run(p, peer_did="did:web:other.example:users:x") == ("deny", "L2")
    assert run(p, action="share") == ("deny", "L2")  # rules are per action


def test_contact_overrides_come_first() -> None:
    p = policy("auto", rule("ask", "allow"))
    deny_rule = ContactPolicyOverrides(rules=[rule("ask", "deny")])
    assert run(p, deny_rule) == ("deny", "L2")
    # An override default only applies when no rule matched.
    assert run(p, ContactPolicyOverrides(default="deny")) == ("allow", "L2")
    assert run(policy("auto"), ContactPolicyOverrides(default="ask")) == ("ask", "L2")


def test_trusted_contacts_skip_l2_consent_but_not_l3() -> None:
    assert run(policy("ask"), trust_level="trusted") == ("allow", "L2")
    assert run(policy("ask"), trust_level="trusted", action="commit") == ("ask", "L3")
    assert run(policy("deny"), trust_level="trusted") == ("deny", "L2")
