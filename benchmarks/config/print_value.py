"""``python -m benchmarks.config.print_value KEY [OVERRIDE ...]``: one value of the runner's
config as the overrides compose it, printed as a Hydra override value (``512``, ``[]``,
``[mem0,strict]``, ``null``).

So a setting has one home: the Makefile reads Table 1's context budget from
``conf/experiment/table1.yaml`` for the report's filter instead of repeating it
(``python -m benchmarks.config.print_value answer.context_budget +experiment=table1``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from omegaconf import OmegaConf

from benchmarks.config.compose import compose_config

_ABSENT = object()


def override_value(value: Any) -> str:
    """``value`` as a Hydra override writes it.

    >>> override_value(512), override_value([]), override_value(["mem0", "strict"])
    ('512', '[]', '[mem0,strict]')
    >>> override_value(None), override_value(True)
    ('null', 'true')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ",".join(override_value(item) for item in value) + "]"
    return str(value)


def config_value(key: str, overrides: Sequence[str]) -> Any:
    """The resolved value at ``key`` of the config ``overrides`` compose (KeyError if absent)."""
    value = OmegaConf.select(compose_config(overrides), key, default=_ABSENT)
    if value is _ABSENT:
        raise KeyError(key)
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def main(argv: Sequence[str] | None = None) -> int:
    """Print the value; exit 2 with a usage line, or naming a key the config lacks."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m benchmarks.config.print_value KEY [OVERRIDE ...]", file=sys.stderr)
        return 2
    try:
        value = config_value(args[0], args[1:])
    except KeyError:
        print(f"error: the config has no key {args[0]!r}", file=sys.stderr)
        return 2
    print(override_value(value))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
