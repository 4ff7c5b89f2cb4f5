"""Plain data: a dataclass to JSON-ready Python and back, by its own fields (one rule for every record).

``plain(trace)`` turns dataclasses into dicts of their fields, tensors into nested lists and dtypes into
names; ``from_plain(Trace, d)`` rebuilds the objects from the fields' type hints. So a settings object, a
model's facts or a step record travels to JSON without a line written for each field. Importing this module
does not import torch (``cost`` uses it, and the command-line tools' ``--help`` must stay instant): a tensor
or a dtype can only exist once torch is imported.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing


def plain(value):
    """``value`` as JSON-ready Python: dataclasses by their fields, tensors as nested lists, dtypes as names."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.float().cpu().tolist()
    if torch is not None and isinstance(value, torch.dtype):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def from_plain(kind, value):
    """The inverse of ``plain`` for a value of type ``kind`` (a type hint: a dataclass, ``list[...]``, ...)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    torch = sys.modules.get("torch")
    if value is None:
        return None
    if origin in (typing.Union, types.UnionType):
        return from_plain(next(a for a in args if a is not type(None)), value)
    if torch is not None and kind is torch.Tensor:
        return torch.tensor(value)
    if torch is not None and kind is torch.dtype:
        return getattr(torch, str(value).removeprefix("torch."))
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        return kind(**{f.name: from_plain(hints[f.name], value[f.name]) for f in dataclasses.fields(kind)
                       if f.init and f.name in value})
    if origin is list:
        return [from_plain(args[0], v) for v in value]
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_plain(args[0], v) for v in value)
        return tuple(from_plain(a, v) for a, v in zip(args, value, strict=True))
    if origin is dict:
        return {k: from_plain(args[1], v) for k, v in value.items()}
    return value
