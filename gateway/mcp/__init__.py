"""Confer's MCP endpoint for coding agents (seed 004): read tools and audited write tools."""
