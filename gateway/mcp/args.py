"""Bounded, strict argument types of the MCP tools (what each tool's input schema says).

A JSON-RPC argument reaches pydantic as a Python value, where the lax types would take
``"5"``, ``1.0`` or ``true`` for an integer and ``0`` or ``"true"`` for a boolean; these types
refuse them (``validation_failed``). Every string and list has a bound, the column's where the
value is stored (``mcp_audit_log.agent`` 128, ``agent_memories.project_id`` 255, a domain 64,
a concept name 200 …), so an oversized value is refused before any work.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictBool, StrictFloat, StrictInt

Limit = Annotated[StrictInt, Field(ge=1, le=200)]
Flag = StrictBool
Agent = Annotated[str, Field(max_length=128)]
"""Who is acting (``mcp_audit_log.agent``, VARCHAR(128))."""
Project = Annotated[str, Field(max_length=255)]
Domain = Annotated[str, Field(max_length=64)]
Topic = Annotated[str, Field(max_length=1000)]
Query = Annotated[str, Field(min_length=1, max_length=1000)]
Threshold = Annotated[StrictFloat, Field(ge=-1, le=1)]
Short = Annotated[str, Field(max_length=64)]
Text = Annotated[str, Field(max_length=32_000)]
Markdown = Annotated[str, Field(max_length=1_000_000)]
Identifier = Annotated[str, Field(max_length=255)]
ConceptName = Annotated[str, Field(max_length=200)]
Notes = Annotated[str, Field(max_length=8_000)]
Domains = Annotated[list[Domain], Field(max_length=20)]
