"""Confer's MCP endpoint for coding agents (MCP server spec): read tools and audited write tools."""
