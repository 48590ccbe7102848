"""A shorter way through FastAPI for the busiest route (a post): :class:`ExpressRoute`.

FastAPI handles every request generically: it walks the endpoint's dependency tree, looks up
each parameter by its aliases, checks each dependency's kind (a generator? a coroutine? a
security scheme with scopes?) and caches it, per request. For a post that generic work costs
about as much as everything else the server does for it (docs/benchmarks.md, "What a post
costs"). An :class:`ExpressRoute` answers the requests that take the common path itself,
doing what FastAPI's handler does for them, in its order, with the route's own fields:

1. the body, when the route takes one: a JSON content type (``application/json``, or
   ``+json``; parameters allowed) and a body that parses
   (:meth:`starlette.requests.Request.json`, as FastAPI reads it);
2. the path and header parameters and the body, validated by the route's own fields;
3. the dependencies, in the endpoint's order, each called once with the request and its own
   dependencies' results, raising what they raise (an unknown bearer token is 401 here as
   there);
4. the endpoint; its result validated and serialised by the route's response field, in a
   ``Response`` with the route's status code.

A request that leaves that path before the endpoint runs (another content type, no body, a
body that is not JSON, a parameter or body that does not validate) is handed to FastAPI's own
handler, which answers it exactly as without this class: errors, their order and their codes
stay FastAPI's. So is every request while FastAPI's own OpenTelemetry instrumentation records
it or dependency overrides are set. A route that needs anything more (query or cookie
parameters, the request or ``Response`` object, background tasks, a dependency with
parameters of its own or one that yields, a form) keeps FastAPI's handler for every request.
The OpenAPI document does not change: the route is an :class:`~fastapi.routing.APIRoute`.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import fastapi.routing
from fastapi import Request, Response
from fastapi.datastructures import DefaultPlaceholder
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import EndpointContext, ResponseValidationError
from fastapi.params import Body, Form
from fastapi.telemetry import get_telemetry_data
from fastapi.utils import is_body_allowed_for_status_code
from pydantic import BaseModel

Handler = Callable[[Request], Coroutine[Any, Any, Response]]

# Parameters the express path reads as FastAPI does (one value, validated by the field):
# plain scalars. Anything else (lists, models, aliases to choose from) is FastAPI's.
_SCALARS = (str, str | None, int, int | None)
_JSON = "application/json"


class ExpressRoute(fastapi.routing.APIRoute):
    """An API route that answers its common requests without FastAPI's generic solving (the
    module docstring says which, and how); every other request gets FastAPI's handler."""

    def get_route_handler(self) -> Handler:
        generic = super().get_route_handler()
        plan = _Plan.of(_effective(self))
        if plan is None:
            return generic

        async def handler(request: Request) -> Response:
            response = await plan.answer(request)
            return response if response is not None else await generic(request)

        return handler


def _effective(route: ExpressRoute) -> Any:
    """What FastAPI builds ``route``'s handler from: the route itself, or, while it builds it
    for a router that included the route's router, that inclusion's context (its prefix, its
    extra dependencies), as :meth:`fastapi.routing.APIRoute.get_route_handler` reads it."""
    variable = getattr(fastapi.routing, "_effective_route_context_var", None)
    context = variable.get() if variable is not None else None
    if context is not None and getattr(context, "original_route", None) is route:
        return context
    return route


@dataclass(frozen=True)
class _Param:
    """A path or header parameter: where it is read from and the field that validates it."""

    field: Any  # fastapi's ModelField
    key: str
    loc: tuple[str, str]


@dataclass(frozen=True)
class _Plan:
    """What answering a route's common request takes, worked out once per route."""

    endpoint: Callable[..., Any]
    dependencies: tuple[Dependant, ...]
    path: tuple[_Param, ...]
    headers: tuple[_Param, ...]
    body: Any  # the body's ModelField, or None
    response: Any  # the response's ModelField
    status_code: int
    serialize: dict[str, Any]
    overrides: Any
    where: str

    @classmethod
    def of(cls, route: Any) -> _Plan | None:
        """The plan for ``route`` (an APIRoute or FastAPI's context of an included one), or
        None when it needs more than the express path does."""
        dependant: Dependant = route.dependant
        if not (
            _plain(dependant)
            and all(_plain_dependency(d) for d in dependant.dependencies)
            and not dependant.query_params
            and not dependant.cookie_params
            and len(dependant.body_params) <= 1
            and not route._embed_body_fields
            and route.response_field is not None
            and route.status_code is not None
            and is_body_allowed_for_status_code(route.status_code)
            and isinstance(route.response_class, DefaultPlaceholder)
            and route.response_model_include is None
            and route.response_model_exclude is None
            and not route.is_sse_stream
            and not route.is_json_stream
            and route.stream_item_field is None
            and inspect.iscoroutinefunction(dependant.call)
        ):
            return None
        body = route.body_field if dependant.body_params else None
        if body is not None and not _json_model(body):
            return None
        params = [*dependant.path_params, *dependant.header_params]
        if not all(_scalar(f) for f in params):
            return None
        return cls(
            endpoint=dependant.call,
            dependencies=tuple(dependant.dependencies),
            path=tuple(_Param(f, _key(f), ("path", _key(f))) for f in dependant.path_params),
            headers=tuple(_Param(f, _key(f), ("header", _key(f))) for f in dependant.header_params),
            body=body,
            response=route.response_field,
            status_code=route.status_code,
            serialize={
                "by_alias": route.response_model_by_alias,
                "exclude_unset": route.response_model_exclude_unset,
                "exclude_defaults": route.response_model_exclude_defaults,
                "exclude_none": route.response_model_exclude_none,
            },
            overrides=route.dependency_overrides_provider,
            where=route.path,
        )

    async def answer(self, request: Request) -> Response | None:
        """The response to ``request``, or None when it leaves the common path before the
        endpoint runs (FastAPI's handler then answers it)."""
        if self._instrumented(request):
            return None
        body: Any = None
        if self.body is not None:
            if not _is_json(request.headers.get("content-type")):
                return None
            if not await request.body():
                return None
            try:
                body = await request.json()
            except Exception:  # FastAPI tells a body that is not JSON (or not UTF-8) apart
                return None
        # Parameters and body are validated before the dependencies run (FastAPI runs them
        # first): validation has no effects, so a request that fails it goes to FastAPI's
        # handler having run none of them, and they still run once per request.
        values: dict[str, Any] = {}
        if not (
            self._read(self.path, request.path_params, values)
            and self._read(self.headers, request.headers, values)
        ):
            return None
        if self.body is not None:
            value, errors = self.body.validate(body, values, loc=("body",))
            if errors:
                return None
            values[self.body.name] = value
        solved: dict[Any, Any] = {}
        for dependency in self.dependencies:
            value = await _solve(dependency, request, solved)
            if dependency.name is not None:
                values[dependency.name] = value
        result = await self.endpoint(**values)
        value, errors = self.response.validate(result, {}, loc=("response",))
        if errors:
            raise ResponseValidationError(errors, body=result, endpoint_ctx=self._context(request))
        content = self.response.serialize_json(value, **self.serialize)
        return Response(content=content, media_type=_JSON, status_code=self.status_code)

    def _instrumented(self, request: Request) -> bool:
        """Whether FastAPI's own telemetry records this request, or dependencies are
        overridden: its handler then answers, as it always did."""
        if request.scope.get("fastapi.telemetry") is not None or get_telemetry_data():
            return True
        return bool(self.overrides is not None and self.overrides.dependency_overrides)

    @staticmethod
    def _read(params: tuple[_Param, ...], source: Any, values: dict[str, Any]) -> bool:
        """Validate each of ``params`` from ``source`` into ``values``; False at the first
        that is missing and required, or invalid."""
        for param in params:
            field = param.field
            raw = source.get(param.key)
            if raw is None:
                if field.field_info.is_required() or field.field_info.validate_default:
                    return False
                values[field.name] = copy.deepcopy(field.default)
                continue
            value, errors = field.validate(raw, values, loc=param.loc)
            if errors:
                return False
            values[field.name] = value
        return True

    def _context(self, request: Request) -> EndpointContext:
        """Where the endpoint is, for a response that does not validate (FastAPI's
        ``endpoint_ctx``)."""
        context = EndpointContext(function=self.endpoint.__name__)
        try:
            if (source := inspect.getsourcefile(self.endpoint)) is not None:
                context["file"] = source
            context["line"] = inspect.getsourcelines(self.endpoint)[1]
        except (OSError, TypeError):
            context = EndpointContext()
        mount = request.scope.get("root_path", "").rstrip("/")
        context["path"] = f"{request.method} {mount}{self.where}"
        return context


async def _solve(dependant: Dependant, request: Request, solved: dict[Any, Any]) -> Any:
    """Call ``dependant`` with the request and its own dependencies' results, each dependency
    once per request (FastAPI's cache: one call however often it is asked for)."""
    call = dependant.call
    if call in solved:
        return solved[call]
    values: dict[str, Any] = {}
    for name in (dependant.request_param_name, dependant.http_connection_param_name):
        if name:
            values[name] = request
    for sub in dependant.dependencies:
        value = await _solve(sub, request, solved)
        if sub.name is not None:
            values[sub.name] = value
    result = await call(**values)  # type: ignore[misc]
    solved[call] = result
    return result


def _is_json(content_type: str | None) -> bool:
    """Whether FastAPI reads a body of ``content_type`` as JSON: ``application/json`` or
    ``application/*+json``, parameters aside (its reading through ``email.message``, whose
    type is ``text/plain`` unless there is exactly one ``/``)."""
    if not content_type:
        return False
    media_type = content_type.partition(";")[0].strip().lower()
    if media_type.count("/") != 1:
        return False
    main, sub = media_type.split("/")
    return main == "application" and (sub == "json" or sub.endswith("+json"))


def _plain(dependant: Dependant) -> bool:
    """No parameter FastAPI supplies from the connection other than the request itself."""
    return not (
        dependant.websocket_param_name
        or dependant.response_param_name
        or dependant.background_tasks_param_name
        or dependant.security_scopes_param_name
    )


def _plain_dependency(dependant: Dependant) -> bool:
    """A dependency the express path calls as FastAPI would: a coroutine (function or
    callable object) taking at most the request and other such dependencies, cached."""
    call = dependant.call
    coroutine = inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(
        getattr(call, "__call__", None)  # noqa: B004 (a security scheme is such an object)
    )
    return (
        call is not None
        and coroutine
        and dependant.use_cache
        and _plain(dependant)
        and not (
            dependant.path_params
            or dependant.query_params
            or dependant.header_params
            or dependant.cookie_params
            or dependant.body_params
        )
        and all(_plain_dependency(d) for d in dependant.dependencies)
    )


def _json_model(field: Any) -> bool:
    """A body that is one pydantic model read from JSON (not a form)."""
    info = field.field_info
    annotation = info.annotation
    return (
        isinstance(info, Body)
        and not isinstance(info, Form)
        and isinstance(annotation, type)
        and issubclass(annotation, BaseModel)
    )


def _scalar(field: Any) -> bool:
    """A parameter read under its one name as one value (FastAPI's rule for a plain scalar:
    no alias choices, no list, no model)."""
    info = field.field_info
    return (
        info.annotation in _SCALARS
        and isinstance(info.validation_alias, str | None)
        and not field.config
        and isinstance(field.alias, str)
    )


def _key(field: Any) -> str:
    """The name a plain parameter is read under: its validation alias, else its alias (as
    FastAPI's ``get_validation_alias`` picks it)."""
    return str(getattr(field, "validation_alias", None) or field.alias)
