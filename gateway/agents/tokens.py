"""Token estimates for budgeting a context.

Exact counts depend on each model's tokenizer, which Confer does not ship; budgets only need a
stable, slightly pessimistic estimate. English averages about four characters per token for
GPT/Claude tokenizers, so one token per three characters (rounded up), plus one per line for
separators, errs on the safe side for code and non-Latin scripts alike.
"""

from __future__ import annotations


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: ``ceil(len / 3) + lines``; 0 for the empty string."""
    if not text:
        return 0
    return -(-len(text) // 3) + text.count("\n") + 1
