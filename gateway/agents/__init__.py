"""The own-agent runtime (DESIGN: context assembly, LLM providers, compaction)."""
