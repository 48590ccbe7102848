"""Every MCP tool argument is strict and bounded, walked from the tools' own input schemas
with the official ``mcp`` client: an integer refuses ``1.0``, ``"5"`` and ``true``, a number
``"0.5"`` and ``true``, a boolean ``0`` and ``"true"``; every string and list has a bound, and
one past it is refused — each time with ``isError`` and ``validation_failed`` naming the
argument, never a crash."""

from __future__ import annotations

from typing import Any

from tests.agents.test_mcp import mcp_client
from tests.gateway.harness import run_instance

WRONG: dict[str, tuple[Any, ...]] = {
    "integer": (1.0, "5", True),
    "number": ("0.5", True),
    "boolean": (0, 1, "true"),
}


def _options(schema: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    """The non-null alternatives of a property's schema (``anyOf`` flattened, refs kept)."""
    if "$ref" in schema:
        return [{"$ref": schema["$ref"]}]
    options = schema.get("anyOf", [schema])
    return [o for o in options if o.get("type") != "null"]


def _unbounded(name: str, schema: dict[str, Any]) -> list[str]:
    """Where a string or array under ``schema`` has no upper bound."""
    found = []
    kind = schema.get("type")
    if kind == "string" and not (
        "maxLength" in schema or "enum" in schema or "format" in schema or "pattern" in schema
    ):
        found.append(name)
    if kind == "array":
        if "maxItems" not in schema:
            found.append(f"{name}[]")
        found += _unbounded(f"{name}[]", schema.get("items", {}))
    return found


async def test_every_tool_argument_is_strict_and_bounded(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        async with mcp_client(instance, alice) as client:
            tools = (await client.list_tools()).tools
            assert len(tools) >= 24
            unbounded, lax, checked = [], [], 0
            for tool in tools:
                schema = tool.input_schema
                for name, prop in schema["properties"].items():
                    if "$ref" in prop:  # free JSON (``meta``): bounded by depth and storability
                        continue
                    for option in _options(prop, schema.get("$defs", {})):
                        unbounded += [f"{tool.name}.{u}" for u in _unbounded(name, option)]
                        wrongs = list(WRONG.get(option.get("type", ""), ()))
                        if option.get("type") == "string" and "maxLength" in option:
                            wrongs.append("x" * (option["maxLength"] + 1))
                        if option.get("type") == "array" and "maxItems" in option:
                            wrongs.append(["a"] * (option["maxItems"] + 1))
                        for wrong in wrongs:
                            checked += 1
                            result = await client.call_tool(tool.name, {name: wrong})
                            content = dict(result.structured_content or {})
                            refused = (
                                result.is_error
                                and content.get("code") == "validation_failed"
                                and name in content.get("error", "")
                            )
                            if not refused:
                                lax.append(f"{tool.name}({name}={str(wrong)[:20]!r}): {content}")
            assert not unbounded, unbounded
            assert not lax, lax
            assert checked >= 100, checked
