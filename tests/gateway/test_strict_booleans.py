"""A boolean in a request body is JSON ``true`` or ``false``: ``0``, ``1`` and ``"true"`` are
refused with a 422, on every request model the API reads."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from gateway.app import create_app
from tests.gateway.harness import run_instance


def _models(cls: type[BaseModel]) -> dict[str, type[BaseModel]]:
    found = {cls.__name__: cls}
    for sub in cls.__subclasses__():
        found.update(_models(sub))
    return found


def _refs(value: Any) -> set[str]:
    if isinstance(value, dict):
        ref = value.get("$ref")
        own = {ref.rsplit("/", 1)[1]} if isinstance(ref, str) else set()
        return own.union(*(_refs(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_refs(v) for v in value))
    return set()


def _request_models() -> list[type[BaseModel]]:
    """Every model reachable from a request body of the OpenAPI document."""
    spec = create_app().openapi()
    schemas = spec["components"]["schemas"]
    bodies = [
        op["requestBody"]
        for item in spec["paths"].values()
        for op in item.values()
        if "requestBody" in op
    ]
    names, todo = set(), _refs(bodies)
    while todo:
        name = todo.pop()
        if name not in names:
            names.add(name)
            todo |= _refs(schemas.get(name, {}))
    known = _models(BaseModel)
    return [known[name] for name in sorted(names) if name in known]


def test_every_boolean_of_every_request_model_is_strict() -> None:
    models = _request_models()
    assert len(models) > 20
    checked, lax = 0, []
    for model in models:
        for name, field in model.model_fields.items():
            if "bool" not in str(field.annotation):
                continue
            checked += 1
            annotation = (
                Annotated[(field.annotation, *field.metadata)]
                if field.metadata
                else field.annotation
            )
            adapter: TypeAdapter[Any] = TypeAdapter(annotation)
            assert adapter.validate_json("true") is True
            for wrong in ("0", "1", '"true"'):
                try:
                    adapter.validate_json(wrong)
                except ValidationError:
                    continue
                lax.append(f"{model.__name__}.{name} accepts {wrong}")
    assert checked >= 8
    assert not lax, lax


@pytest.mark.parametrize("wrong", [0, 1, "true"])
async def test_a_number_or_string_for_a_boolean_is_refused(database_url: str, wrong: Any) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        refused = await alice.request(
            "POST", "/v1/contacts", json={"did": bob.did, "pinned": wrong}
        )
        assert refused.status_code == 422, refused.text
        assert refused.json()["code"] == "validation_failed"
        contact = await alice.request("POST", "/v1/contacts", json={"did": bob.did, "muted": True})
        assert contact.status_code == 201, contact.text
        patched = await alice.request(
            "PATCH", f"/v1/contacts/{contact.json()['id']}", json={"muted": wrong}
        )
        assert patched.status_code == 422, patched.text
        group = await alice.request(
            "POST",
            "/v1/conversations",
            json={"type": "group", "name": "g", "participant_dids": [bob.did]},
        )
        assert group.status_code == 201, group.text
        path = f"/v1/conversations/{group.json()['id']}"
        assert (await alice.request("PATCH", path, json={"archived": wrong})).status_code == 422
        archived = await alice.request("PATCH", path, json={"archived": True})
        assert archived.status_code == 200, archived.text
