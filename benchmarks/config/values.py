"""A config value by key, checked: missing, unresolvable, mistyped or out-of-range values are a
:class:`ConfigError` that names the key; :func:`check_options` checks a node's options against the
constructor they fill."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

ABSENT = object()
MANDATORY = "missing: a mandatory value (???) that no config or override sets"


class ConfigError(ValueError):
    """A config value is missing or invalid; the message starts with its key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"config key '{key}': {message}")
        self.key = key


def value_at(cfg: DictConfig, key: str, default: Any = ABSENT, *, named: str | None = None) -> Any:
    """The value at ``key`` below ``cfg``, ``default`` if absent (an error without one); errors name
    ``named`` (the full key), else ``key``."""
    try:
        value = OmegaConf.select(cfg, key, throw_on_missing=True, default=ABSENT)
    except MissingMandatoryValue as error:
        raise ConfigError(named or key, MANDATORY) from error
    except OmegaConfBaseException as error:  # e.g. an interpolation that does not resolve
        raise ConfigError(named or key, f"cannot resolve: {first_line(error)}") from error
    if value is ABSENT:
        if default is not ABSENT:
            return default
        raise ConfigError(named or key, "missing")
    return value


def first_line(error: Exception) -> str:
    """OmegaConf's message without the lines it adds (the key, the object type)."""
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def positive_int(
    cfg: DictConfig,
    key: str,
    *,
    allow_none: bool = False,
    allow_zero: bool = False,
    default: Any = ABSENT,
) -> Any:
    value = value_at(cfg, key, default)
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
        kind = "a non-negative" if allow_zero else "a positive"
        raise ConfigError(
            key, f"expected {kind} integer{' or null' if allow_none else ''}, got {value!r}"
        )
    return value


def number_at(cfg: DictConfig, key: str, *, positive: bool) -> Any:
    value = value_at(cfg, key)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not (value > 0 if positive else value >= 0):  # NaN fails both
        kind = "a positive" if positive else "a non-negative"
        raise ConfigError(key, f"expected {kind} number, got {value!r}")
    return value


def choice_at(cfg: DictConfig, key: str, choices: tuple[Any, ...]) -> Any:
    value = value_at(cfg, key)
    # By type too: 1 == True and 0.0 == False, but neither is a valid boolean setting.
    if not any(type(value) is type(choice) and value == choice for choice in choices):
        raise ConfigError(key, f"expected one of {list(choices)}, got {value!r}")
    return value


def plain(value: Any) -> Any:
    """A config value as plain Python (containers converted, interpolations resolved)."""
    if OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=True)
    return value


def check_options(node: DictConfig, key: str, constructor: Callable[..., Any] | None) -> None:
    """Each option of the config ``node`` at ``key`` against the parameter of ``constructor`` it
    fills: an unset mandatory value (``???``), an unknown name or a value of the wrong scalar type
    is a :class:`ConfigError` naming the option's key; containers and unannotated constructors are
    left to the constructor."""
    target = OmegaConf.select(node, "_target_")
    parameters, hints = _parameters(constructor)
    takes_any = parameters is None or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )
    for name in node:
        if str(name).startswith("_"):
            continue
        value = value_at(node, str(name), named=f"{key}.{name}")
        if parameters is None or name not in parameters:
            if takes_any:
                continue
            raise ConfigError(f"{key}.{name}", f"{target} has no option {name!r}")
        if name in hints and not _is_instance(value, hints[name]):
            raise ConfigError(f"{key}.{name}", f"expected {hints[name]}, got {value!r}")


def _parameters(
    constructor: Callable[..., Any] | None,
) -> tuple[Mapping[str, inspect.Parameter] | None, dict[str, Any]]:
    """A constructor's parameters and type hints (a class's up its bases while ``__init__`` forwards
    ``**options``); ``(None, {})`` when unknown or unresolvable."""
    if constructor is None:
        return None, {}
    if isinstance(constructor, type):
        return _class_parameters(constructor)
    try:
        return inspect.signature(constructor).parameters, typing.get_type_hints(constructor)
    except Exception:
        return None, {}


def _class_parameters(
    cls: type,
) -> tuple[Mapping[str, inspect.Parameter] | None, dict[str, Any]]:
    """The options a class takes: its ``__init__``'s named parameters and those of each base's
    ``__init__`` its ``**options`` reach."""
    parameters: dict[str, inspect.Parameter] = {}
    hints: dict[str, Any] = {}
    for klass in cls.__mro__:
        if klass is object or "__init__" not in vars(klass):
            continue
        own, own_hints = _parameters(vars(klass)["__init__"])
        if own is None:
            return None, {}
        for name, parameter in own.items():
            if parameter.kind is not inspect.Parameter.VAR_KEYWORD and name != "self":
                parameters.setdefault(name, parameter)
        hints = {**own_hints, **hints}
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in own.values()):
            return parameters, hints
    return None, {}  # every __init__ up to object forwards: the options are unknown here


def _is_instance(value: Any, annotation: Any) -> bool:
    """Whether ``value`` fits a scalar annotation (True for annotations not checked here)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_is_instance(value, member) for member in typing.get_args(annotation))
    if origin is typing.Literal:
        return any(type(value) is type(a) and value == a for a in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    return True
