"""Tools: a definition the model reads, plus the code that runs when the model asks.

`@tool` turns a sync or async function or method into a `Tool`; `Tool(...)` builds one
from a name, description, JSON schema and handler; `tools_from(obj)` collects an
object's `@tool` methods.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType, ModuleType
from typing import Any, TypeAlias, TypedDict, TypeVar, Unpack, overload

import anyio.to_thread
import pydantic_core
from pydantic import ValidationError

from ._activity import run_while_active
from ._docstrings import parse_docstring
from ._no_suspend import never_suspends
from .checks import require_callable, require_mapping, require_number
from .context import ToolContext
from .errors import AdvisorChainError, ChainConfigurationError, ToolDefinitionError
from .parts import DocumentPart, ImagePart, TextPart
from .schema import ArgumentsModel, check_json_schema, clean_schema, signature_model

ToolContent: TypeAlias = str | tuple[TextPart | ImagePart | DocumentPart, ...]
"""What a tool result carries to the model: text, or parts (text, images, documents)."""

ResultConverter: TypeAlias = Callable[[Any], str | Sequence[TextPart | ImagePart | DocumentPart]]
"""Turns a tool's return value into what the model reads: text, or content parts."""

_TOOL_PARTS = (TextPart, ImagePart, DocumentPart)

ToolHandler: TypeAlias = Callable[[dict[str, Any], ToolContext], Any]
"""The callable behind a schema-declared `Tool`: `(arguments, context) -> result`; may be async."""

F = TypeVar("F", bound=Callable[..., Any])


class InvalidToolArguments(AdvisorChainError, ValueError):
    """Arguments that do not fit a tool's input schema; the message is written for the model."""


class ValidatedArguments(dict[str, Any]):
    """A call's arguments as the tool will run with them: the values after validation
    (`{"amount": "150"}` for `amount: int` is `{"amount": 150}` here), read-only.

    What `ToolInvocation.arguments` holds for every call the tool loop runs, so that a
    hook, a policy or an approver decides on what runs. `validated` is the tool's
    validated form (what `Tool.run` takes), `tool` the tool that validated them; a
    mapping that is not one of these, or was validated by another tool, is validated
    again before any hook or the tool sees it. It is a `dict` (JSON encoders and
    `dict(...)` take it as one) that refuses changes: pass other arguments with
    `ToolInvocation.with_arguments`.
    """

    __slots__ = ("tool", "validated")

    def __init__(self, values: Mapping[str, Any], *, tool: Tool, validated: Any) -> None:
        super().__init__(values)
        self.tool = tool
        self.validated = validated

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "a tool call's validated arguments are read-only: "
            "pass other arguments with invocation.with_arguments(...)"
        )

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """What a model is told about a tool: name, description and JSON schema of its input."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: MappingProxyType({"type": "object", "properties": {}})
    )

    def fingerprint(self) -> str:
        """A stable text identifying this definition (for caches keyed by catalog)."""
        return json.dumps(
            [self.name, self.description, self.parameters], sort_keys=True, default=str
        )


def default_result_converter(value: Any) -> str:
    """`str` passes through; anything else becomes JSON (models, dataclasses, dates, ...)."""
    if isinstance(value, str):
        return value
    return pydantic_core.to_json(value, fallback=str).decode()


class ToolOptions(TypedDict, total=False):
    """A tool's options, declared once: the keywords `Tool(...)`, `Tool.from_function`
    and `@tool(...)` take beside the name and description (each is an attribute of the
    `Tool` made; see `Tool` for what each does). Every key may be left out: the default
    is `False`, or `None` for the four that take a value (`result_converter` then means
    `default_result_converter`, `metadata` an empty mapping). A key that is not one of
    these is a `TypeError` when the tool is made."""

    return_direct: bool
    requires_approval: bool
    result_converter: ResultConverter | None
    timeout: float | None
    run_inline: bool
    metadata: Mapping[str, Any] | None
    read_only: bool
    idempotent: bool
    sequential: bool
    reports_progress: bool
    idle_timeout: float | None


_OPTION_NAMES = frozenset(ToolOptions.__optional_keys__)


class Tool:
    """A tool the chain can offer to a model and execute.

    Build one with `@tool`, or directly: `Tool(name, description, parameters, handler)`
    where `handler(arguments, context)` receives the JSON arguments as a dict (checked
    against `parameters`) and may be sync or async.

    - `return_direct`: the result goes to the caller instead of back to the model.
    - `requires_approval`: an `ApprovalAdvisor` asks a human before it runs.
    - `result_converter`: turns the return value into text (default: str or JSON).
      A tool that returns an `ImagePart`, `DocumentPart` or `TextPart`, or a list of
      them (strings in the list are text), answers with those parts and the converter
      is not called; a converter may return parts too.
    - `timeout`: seconds before the call is abandoned and reported as timed out.
    - `reports_progress`: the tool calls `ToolContext.report_progress(...)`; while the
      chain streams, its reports arrive as `ToolProgress` events with the call's id
      (undeclared, they are not carried).
    - `idle_timeout`: seconds the call may go without a progress report before it is
      abandoned (`ToolIdleTimeoutError`, an error result); each report restarts the clock,
      on `call` and `stream` alike. Implies `reports_progress`. `timeout` still caps
      the call in all.
    - `run_inline`: run a sync function on the event loop instead of a worker thread;
      only for functions that never block (pure computation, dict look-ups).

    Effects, declared by the tool's author and read by the links:

    - `read_only`: the tool changes nothing (a look-up); `ToolResultCacheAdvisor` may
      cache its results and `ToolRetryAdvisor` may run it again.
    - `idempotent`: running it twice with the same arguments has the effect of running it
      once; `ToolRetryAdvisor` may retry it. A tool that is neither has effects: once a
      call of it started, `FallbackModel` does not start the turn over on another model.
    - `sequential`: the tool runs alone: the calls the model asked for before it in the
      same round finish first, those after it start once it ended (the others of a
      round run concurrently).

    A sync tool runs in a worker thread; when its call is cancelled or times out the turn
    goes on at once and the thread is left to finish on its own (threads cannot be
    interrupted), so a sync tool that may hang should check a deadline itself.

    Return a value, not an iterator: a generator, iterator or async iterator result is
    answered with an error (it is never drained: it may not end), so return a list.
    """

    def __init__(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any] | None = None,
        handler: ToolHandler | None = None,
        **options: Unpack[ToolOptions],
    ) -> None:
        if (
            not isinstance(name, str)
            or not name
            or not all(c.isalnum() or c in "_-." for c in name)
        ):
            raise ToolDefinitionError(
                f"invalid tool name {name!r}: use letters, digits, '_', '-' or '.'"
            )
        unknown = options.keys() - _OPTION_NAMES
        if unknown:
            raise TypeError(
                f"tool {name!r}: unknown option(s) {', '.join(sorted(unknown))}; "
                f"a tool takes {', '.join(sorted(_OPTION_NAMES))}"
            )
        result_converter = options.get("result_converter")
        metadata = options.get("metadata")
        _check_arguments(name, description, parameters, handler, result_converter, metadata)
        timeout = options.get("timeout")
        require_number(timeout, f"tool {name!r}: timeout", positive=True, optional=True)
        idle_timeout = options.get("idle_timeout")
        if idle_timeout is not None and not idle_timeout > 0:
            raise ToolDefinitionError(f"tool {name!r}: idle_timeout must be a positive number")
        self.definition = ToolDefinition(
            name, description, parameters or {"type": "object", "properties": {}}
        )
        self.return_direct = options.get("return_direct", False)
        self.requires_approval = options.get("requires_approval", False)
        self.result_converter: ResultConverter = result_converter or default_result_converter
        self.timeout = timeout
        self.run_inline = options.get("run_inline", False)
        self.read_only = options.get("read_only", False)
        self.idempotent = options.get("idempotent", False)
        self.sequential = options.get("sequential", False)
        self.idle_timeout = idle_timeout
        self.reports_progress = options.get("reports_progress", False) or idle_timeout is not None
        self.metadata: Mapping[str, Any] = metadata or {}
        self._handler = handler
        self._function: Callable[..., Any] | None = None
        self._model: type[ArgumentsModel] | None = None
        self._context_param: str | None = None
        self._returns_none = False
        self._is_async = handler is not None and _is_async_callable(handler)
        self._unbound_method = False

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        return self.definition.name

    @property
    def description(self) -> str:
        """What the model is told the tool does."""
        return self.definition.description

    @property
    def takes_context(self) -> bool:
        """Whether the tool's code receives the tool context: a function tool with a
        `ToolContext` parameter, or any tool built on a handler (schema-declared, MCP,
        sub-agent), which is always given it."""
        return self._model is None or self._context_param is not None

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    # -- built from functions -------------------------------------------------------------

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        **options: Unpack[ToolOptions],
    ) -> Tool:
        """A tool whose input schema comes from `fn`'s signature and docstring."""
        if isinstance(fn, str):
            raise ToolDefinitionError(
                f"a tool is made from a function, not the string {fn!r} (to name it, write "
                "@tool(name=...))"
            )
        require_callable(fn, "the tool's function", "the function the model's calls run")
        if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
            raise ToolDefinitionError(f"tool {fn.__name__!r}: generators cannot be tools")
        tool_name = name or fn.__name__
        doc = parse_docstring(inspect.getdoc(fn))
        params = list(inspect.signature(fn).parameters)
        is_method = bool(params) and params[0] in ("self", "cls") and not inspect.ismethod(fn)
        model, context_param, returns_none = signature_model(
            fn, tool_name, doc, skip_first=is_method
        )
        schema = clean_schema(model.model_json_schema())
        schema.pop("additionalProperties", None)
        schema.setdefault("properties", {})
        tool = cls(
            tool_name,
            description if description is not None else (doc.description or tool_name),
            schema,
            **options,
        )
        tool._function = fn
        tool._model = model
        tool._context_param = context_param
        tool._returns_none = returns_none
        tool._is_async = _is_async_callable(fn)
        tool._unbound_method = is_method
        return tool

    def __get__(self, instance: object, owner: type | None = None) -> Tool:
        if instance is None or not self._unbound_method:
            return self
        cache = instance.__dict__ if hasattr(instance, "__dict__") else None
        key = f"__advisorchain_tool_{self.name}"
        if cache is not None and key in cache:
            bound: Tool = cache[key]
            return bound
        bound = self._bind(instance)
        if cache is not None:
            cache[key] = bound
        return bound

    def _bind(self, instance: object) -> Tool:
        bound = Tool.__new__(Tool)
        bound.__dict__.update(self.__dict__)
        assert self._function is not None
        bound._function = partial(self._function, instance)
        bound._unbound_method = False
        return bound

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (as if it were not a tool)."""
        if self._function is None:
            raise TypeError(f"tool {self.name!r} has no function to call directly")
        return self._function(*args, **kwargs)

    # -- execution --------------------------------------------------------------------------

    def validate_arguments(self, arguments: Mapping[str, Any]) -> Any:
        """Check `arguments` against the input schema.

        Returns the validated form that `run` accepts; raises `InvalidToolArguments` with a
        message meant for the model.
        """
        if self._model is not None:
            try:
                return self._model.model_validate(arguments)
            except ValidationError as exc:
                raise InvalidToolArguments(_describe_validation_error(exc)) from None
        errors = check_json_schema(dict(arguments), self.definition.parameters)
        if errors:
            raise InvalidToolArguments("; ".join(errors))
        return dict(arguments)

    def check_arguments(self, arguments: Mapping[str, Any]) -> ValidatedArguments:
        """`arguments` validated (`validate_arguments`), as the values the tool runs with.

        For a function tool these are the parameters it is called with (coerced by
        pydantic: `"150"` for an `int` is `150`, a date text is a `date`); for a
        schema-declared tool, the checked arguments. Raises `InvalidToolArguments`.
        """
        if type(arguments) is ValidatedArguments and arguments.tool is self:
            return arguments
        validated = self.validate_arguments(arguments)
        if self._model is not None and isinstance(validated, self._model):
            values: Mapping[str, Any] = validated.__dict__
        elif isinstance(validated, Mapping):
            values = validated
        else:  # a subclass's own validated form: the arguments it was made from
            values = arguments
        return ValidatedArguments(values, tool=self, validated=validated)

    async def run(
        self, arguments: Mapping[str, Any], context: ToolContext, *, validated: Any = None
    ) -> Any:
        """Validate (unless `validated` is given) and execute; returns the raw result."""
        if self._unbound_method:
            raise ToolDefinitionError(
                f"tool {self.name!r} is a method: attach it through its instance "
                "(tools_from(obj) or obj.method)"
            )
        if validated is None:
            validated = self.validate_arguments(arguments)
        if self._model is not None:
            assert self._function is not None
            kwargs = dict(validated.__dict__)
            if self._context_param is not None:
                kwargs[self._context_param] = context
            call: Callable[[], Any] = partial(self._function, **kwargs)
        else:
            if self._handler is None:
                raise ToolDefinitionError(f"tool {self.name!r} has no handler to run")
            call = partial(self._handler, validated, context)
        if self.idle_timeout is not None:
            work = partial(self._execute, call)
            return await run_while_active(work, self.idle_timeout, self.name)
        if self._is_async:  # without `_execute`'s frame: 2.3% of the bare turn, measured
            return await call()  # alone; kept for the 10% allowance (architecture decision 29)
        return await self._execute(call)

    async def _execute(self, call: Callable[[], Any]) -> Any:
        if self._is_async:
            return await call()
        if self.run_inline:
            result = call()
        else:
            result = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        if inspect.isawaitable(result):
            return await result
        return result

    def _never_suspends(self) -> bool:
        """Whether `run` (this class's) of an async function whose code cannot suspend
        (`core/_no_suspend.py`): then a call runs to its end in one step, and a round of
        such calls needs no task group (`ToolCallingManager._never_suspend`: 15% of the
        bare turn, measured). Computed once."""
        known: bool | None = self.__dict__.get("_no_suspend")
        if known is None:
            known = self.__dict__["_no_suspend"] = (
                type(self).run is Tool.run
                and self._is_async
                and self.idle_timeout is None
                and not self._unbound_method
                and never_suspends(self._function if self._model is not None else self._handler)
            )
        return known

    def convert_result(self, value: Any) -> ToolContent:
        """What the model reads for a return value: text, or content parts."""
        if value is None and self._returns_none:
            return "Done"
        parts = result_parts(value)
        if parts is not None:
            return parts
        converted = self.result_converter(value)
        if isinstance(converted, str):
            return converted
        parts = result_parts(list(converted))
        if parts is None:
            raise TypeError(
                f"the result converter of {self.name!r} returned neither text nor content parts"
            )
        return parts


def result_parts(value: Any) -> tuple[TextPart | ImagePart | DocumentPart, ...] | None:
    """`value` as tool-result parts if it is a part or a list of parts (and strings);
    `None` if it is anything else."""
    if isinstance(value, _TOOL_PARTS):
        return (value,)
    if not isinstance(value, (list, tuple)) or not value:
        return None
    if not any(isinstance(item, _TOOL_PARTS) for item in value):
        return None
    if not all(isinstance(item, (str, *_TOOL_PARTS)) for item in value):
        return None
    return tuple(TextPart(text=item) if isinstance(item, str) else item for item in value)


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004
    )


def _describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unexpected argument"
        elif error["type"] == "missing":
            message = "missing required argument"
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


@overload
def tool(fn: F, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    **options: Unpack[ToolOptions],
) -> Callable[[F], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    **options: Unpack[ToolOptions],
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function or method into a `Tool` (`@tool` or `@tool(...)`).

    The input schema comes from the type hints (pydantic): `Annotated[T, Field(...)]`,
    defaults, `Optional`, enums, `Literal`, dates and nested models all work; parameter
    descriptions may also come from the docstring's `Args:` section, the tool's
    description from the docstring's text. A parameter annotated `ToolContext` receives
    the tool context and is not shown to the model. The result is still callable as
    the plain function. `read_only`, `idempotent` and `sequential` declare the tool's
    effects; `reports_progress` and `idle_timeout` its progress reports (see `Tool`).
    """

    def decorate(f: Callable[..., Any]) -> Tool:
        return Tool.from_function(f, name=name, description=description, **options)

    if fn is not None:
        return decorate(fn)
    return decorate


def tools_from(*sources: object) -> list[Tool]:
    """The tools of objects, classes' instances or modules: their `@tool` members, bound.

    Tools passed directly are kept. Two tools with one name are an error.
    """
    found: dict[str, Tool] = {}
    for source in sources:
        for t in _tools_of(source):
            if t.name in found:
                raise ChainConfigurationError(f"two tools are named {t.name!r}")
            found[t.name] = t
    return list(found.values())


def _tools_of(source: object) -> Iterable[Tool]:
    if isinstance(source, Tool):
        yield source
        return
    if isinstance(source, ModuleType):
        yield from (v for v in vars(source).values() if isinstance(v, Tool))
        return
    seen: set[str] = set()
    for klass in type(source).__mro__:
        for attr, value in vars(klass).items():
            if isinstance(value, Tool) and attr not in seen:
                seen.add(attr)
                yield getattr(source, attr)


def _check_arguments(
    name: str,
    description: object,
    parameters: object,
    handler: object,
    result_converter: object,
    metadata: object,
) -> None:
    """Refuse constructor arguments of the wrong kind, naming what is expected."""
    where = f"tool {name!r}"
    if not isinstance(description, str):
        raise ToolDefinitionError(f"{where}: description must be a string, not {description!r:.80}")
    if parameters is not None and not isinstance(parameters, Mapping):
        raise ToolDefinitionError(
            f"{where}: parameters must be a JSON schema (a dict), not {parameters!r:.80}"
        )
    if handler is not None:
        require_callable(handler, f"{where}: handler", "handler(arguments, context), sync or async")
    if result_converter is not None:
        require_callable(result_converter, f"{where}: result_converter", "result -> content")
    if metadata is not None:
        require_mapping(metadata, f"{where}: metadata")


def merge_tools(*groups: Iterable[Tool]) -> tuple[Tool, ...]:
    """Concatenate tool groups; a name that appears twice is a `ChainConfigurationError`,
    a value that is not a `Tool` a `TypeError`."""
    merged: dict[str, Tool] = {}
    for group in groups:
        if isinstance(group, (str, Tool)) or not isinstance(group, Iterable):
            raise TypeError(f"tools must be a list of Tool, not {type(group).__name__}")
        for t in group:
            if not isinstance(t, Tool):
                hint = " (make it one with @tool)" if callable(t) else ""
                raise TypeError(f"tools must hold Tool objects, not {t!r:.80}{hint}")
            if t.name in merged and merged[t.name] is not t:
                raise ChainConfigurationError(
                    f"two different tools are named {t.name!r}; rename one"
                )
            merged[t.name] = t
    return tuple(merged.values())


__all__ = [
    "InvalidToolArguments",
    "ResultConverter",
    "Tool",
    "ToolContent",
    "ToolDefinition",
    "ToolHandler",
    "ToolOptions",
    "ValidatedArguments",
    "default_result_converter",
    "merge_tools",
    "result_parts",
    "tool",
    "tools_from",
]
