"""The own-agent runtime: context assembly, LLM providers, compaction, task worker (seed 000)."""
