"""Plain record classes without ``dataclasses`` (issue 19: start-up cost).

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``tokenize``, ``dis``): about 10 ms of a
command's start, more than a raw Grid Engine binary's whole call. ``record`` makes the same class
from the same source for the subset the shim uses: fields from the class annotations, in order;
class-level defaults (kept as class attributes, as a dataclass keeps them); ``factory(make)`` for
a fresh default per instance (``field(default_factory=make)``); ``frozen``; ``__post_init__``.
The class gets ``__init__`` (positional or keyword), ``__eq__`` (same class, fields equal),
``__repr__`` (``Name(a=1, b='x')``), hashing as a dataclass has it (by the fields when frozen,
none otherwise) and ``__record_fields__``, unless the class defines them itself. ``replace`` is
``dataclasses.replace``'s counterpart. No code is generated: each is one small closure.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable


class factory:
    """A field's default made anew for each instance (``field(default_factory=make)``)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]):
        self.make = make


class FrozenRecordError(AttributeError):
    """An assignment to a field of a frozen record (as dataclasses.FrozenInstanceError)."""


def record(cls: type | None = None, *, frozen: bool = False):
    """``@record`` or ``@record(frozen=True)``: see the module's docstring."""

    def wrap(cls: type) -> type:
        names = tuple(cls.__dict__.get("__annotations__", {}))
        defaults: dict[str, Any] = {}
        factories: dict[str, Callable[[], Any]] = {}
        for n in names:
            if n in cls.__dict__:
                v = cls.__dict__[n]
                if isinstance(v, factory):
                    factories[n] = v.make
                    delattr(cls, n)
                else:
                    defaults[n] = v
            elif defaults or factories:
                raise TypeError(f"non-default argument {n!r} follows default argument")
        known = frozenset(names)
        put = object.__setattr__

        def __init__(self, *args: Any, **kw: Any) -> None:
            if len(args) > len(names):
                raise TypeError(f"{cls.__name__}() takes {len(names)} arguments, {len(args)} given")
            values = dict(zip(names, args))
            for k, v in kw.items():
                if k not in known:
                    raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {k!r}")
                if k in values:
                    raise TypeError(f"{cls.__name__}() got multiple values for argument {k!r}")
                values[k] = v
            for n in names:
                if n in values:
                    put(self, n, values[n])
                elif n in factories:
                    put(self, n, factories[n]())
                elif n in defaults:
                    put(self, n, defaults[n])
                else:
                    raise TypeError(f"{cls.__name__}() missing required argument: {n!r}")
            post = getattr(self, "__post_init__", None)
            if post is not None:
                post()

        def _values(self) -> tuple:
            return tuple(getattr(self, n) for n in names)

        def __eq__(self, other: object) -> bool:
            if other.__class__ is not self.__class__:
                return NotImplemented
            return _values(self) == _values(other)

        def __repr__(self) -> str:
            return f"{type(self).__qualname__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in names) + ")"

        own = cls.__dict__
        for name, fn in (("__init__", __init__), ("__eq__", __eq__), ("__repr__", __repr__)):
            if name not in own:
                fn.__qualname__ = f"{cls.__qualname__}.{name}"
                setattr(cls, name, fn)
        if "__hash__" not in own or own["__hash__"] is None:
            cls.__hash__ = (lambda self: hash(_values(self))) if frozen else None  # type: ignore[assignment]
        if frozen:
            def __setattr__(self, name: str, value: Any) -> None:
                raise FrozenRecordError(f"cannot assign to field {name!r}")

            def __delattr__(self, name: str) -> None:
                raise FrozenRecordError(f"cannot delete field {name!r}")

            cls.__setattr__ = __setattr__  # type: ignore[assignment]
            cls.__delattr__ = __delattr__  # type: ignore[assignment]
        cls.__record_fields__ = names
        cls.__match_args__ = names
        return cls

    return wrap if cls is None else wrap(cls)


def replace(obj: Any, **changes: Any) -> Any:
    """A copy of a record with ``changes`` (field=value), as ``dataclasses.replace``."""
    values = {n: getattr(obj, n) for n in type(obj).__record_fields__}
    values.update(changes)
    return type(obj)(**values)


class NS(dict):
    """A dict whose keys read as attributes; nested dicts are NS too."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    @classmethod
    def wrap(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return cls({k: cls.wrap(v) for k, v in value.items()})
        if isinstance(value, list):
            return [cls.wrap(v) for v in value]
        return value
