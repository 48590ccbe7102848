"""The own-agent runtime: context assembly, LLM providers, compaction, task worker.

The agent follows the context-tables spec ("Tablas de Contexto": memories, knowledge,
compaction, ambient context and the seven-step context flow), see docs/agents.md.
"""
