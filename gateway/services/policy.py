"""Policy evaluation: an agent's ``PolicyConfig`` merged with a contact's overrides.

``evaluate`` answers allow / deny / ask for one request (peer DID, action, text), first match
wins in this order: the contact's override rules, the agent's rules, the contact's override
default, the agent's default (``auto`` means allow). Then the permission level shapes it
(DESIGN "permission levels"): L1 (``read``) proceeds unless denied — it is only logged; L2
(``ask``, ``share``) follows the policy, and a ``trusted`` contact skips its consent; L3
(``commit``) always asks unless denied. Rule ``peer`` and ``pattern`` are shell-style globs
(``fnmatch``) over the peer DID and the request text.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from models.agents import PolicyConfig, PolicyRule
from models.api import ContactPolicyOverrides

Effect = Literal["allow", "deny", "ask"]
LEVELS = {"read": "L1", "ask": "L2", "share": "L2", "commit": "L3"}
DEFAULT_ACTION = "ask"


@dataclass(frozen=True)
class Verdict:
    """The outcome: ``effect``, the action's ``level`` and which rule decided (``reason``)."""

    effect: Effect
    level: str
    reason: str


def _matches(rule: PolicyRule, peer_did: str, action: str, text: str) -> bool:
    if rule.action != action:
        return False
    if rule.peer and not fnmatchcase(peer_did, rule.peer):
        return False
    return not rule.pattern or fnmatchcase(text, rule.pattern)


def _policy_effect(
    policy: PolicyConfig, overrides: ContactPolicyOverrides, peer_did: str, action: str, text: str
) -> tuple[Effect, str]:
    for index, rule in enumerate(overrides.rules):
        if _matches(rule, peer_did, action, text):
            return rule.effect, f"contact rule {index}"
    for index, rule in enumerate(policy.rules):
        if _matches(rule, peer_did, action, text):
            return rule.effect, f"agent rule {index}"
    if overrides.default is not None:
        default, source = overrides.default, "contact default"
    else:
        default, source = policy.default, "agent default"
    return ("allow" if default == "auto" else default), source


def evaluate(
    policy: PolicyConfig,
    overrides: ContactPolicyOverrides,
    *,
    trust_level: str,
    peer_did: str,
    action: str,
    text: str,
) -> Verdict:
    """Allow, deny or ask for ``action`` from ``peer_did``. ``action`` is a PolicyRule action."""
    level = LEVELS[action]
    effect, reason = _policy_effect(policy, overrides, peer_did, action, text)
    if effect == "deny":
        return Verdict("deny", level, reason)
    if level == "L1":
        return Verdict("allow", level, f"{reason}; L1 proceeds and is logged")
    if level == "L3":
        return Verdict("ask", level, f"{reason}; L3 always asks")
    if effect == "ask" and trust_level == "trusted":
        return Verdict("allow", level, f"{reason}; trusted contact")
    return Verdict(effect, level, reason)
