"""Records for the modules every one-shot command loads, made without the dataclasses module.

On Python 3.11 each `@dataclass` compiles six methods one by one (0.2-0.5 ms a class: a one-shot `snapshots capture`
made 27 of them, 9.8 ms) and `import dataclasses` pulls in inspect, ast, dis and tokenize (~4.5 ms): ~14 ms of a
73 ms command (bench/README.md, issue 35 row (e)). `record` compiles a class's `__init__`, `__eq__` and `__hash__`
in one `exec` (~0.1 ms a class) when the class is first used (`_stand_in`); type checkers read it as a dataclass
(PEP 681). It keeps what this code uses of dataclasses: defaults, `field(default=, default_factory=, repr=,
compare=)`, eq, frozen (hashable), repr, `fields()`, `astuple()`, `asdict()` and `replace()`. Modules a one-shot
command does not load keep `@dataclass`. `NamedTuple` is typing's class syntax without its check of each annotation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, dataclass_transform, overload

_T = TypeVar("_T")


class _Missing:
    """No default given."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a frozen record (as dataclasses.FrozenInstanceError)."""


class Field:
    """One field's options (what `field()` returns, replaced on the class by its default)."""

    __slots__ = ("compare", "default", "factory", "name", "repr")

    def __init__(self, default: Any, factory: Any, repr: bool, compare: bool) -> None:
        self.name, self.default, self.factory, self.repr, self.compare = "", default, factory, repr, compare


@overload
def field(*, default: _T, repr: bool = True, compare: bool = True) -> _T: ...
@overload
def field(*, default_factory: Callable[[], _T], repr: bool = True, compare: bool = True) -> _T: ...
def field(*, default: Any = MISSING, default_factory: Any = MISSING, repr: bool = True,
          compare: bool = True) -> Any:
    """A field's default, or a factory called for each new record, and whether repr and == look at it."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("field() takes a default or a default_factory, not both")
    return Field(default, default_factory, repr, compare)


def fields(cls_or_record: Any) -> tuple[Field, ...]:
    """The record's fields, in declaration order."""
    found: tuple[Field, ...] = cls_or_record.__record_fields__
    return found


def astuple(rec: Any) -> tuple[Any, ...]:
    """The record's field values, in declaration order (not recursive, unlike dataclasses.astuple)."""
    return tuple(getattr(rec, f.name) for f in rec.__record_fields__)


def asdict(rec: Any) -> dict[str, Any]:
    """The record as a dict, with records inside it (in lists, tuples and dicts too) made dicts as well and those
    containers rebuilt, as dataclasses.asdict; other values are shared, not deep-copied."""
    return {f.name: _plain(getattr(rec, f.name)) for f in rec.__record_fields__}


def _plain(value: Any) -> Any:
    if hasattr(type(value), "__record_fields__"):
        return asdict(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


@overload
@dataclass_transform(field_specifiers=(field,))
def record(cls: type[_T], /) -> type[_T]: ...
@overload
@dataclass_transform(field_specifiers=(field,))
def record(*, frozen: bool = False) -> Callable[[type[_T]], type[_T]]: ...
def record(cls: Any = None, /, *, frozen: bool = False) -> Any:
    """Give `cls` an `__init__` from its annotated fields, field-wise `==`, a repr, and if frozen a hash and no
    assignment after `__init__`."""
    if cls is None:
        return lambda c: _build(c, frozen)
    return _build(cls, frozen)


_MADE = frozenset({"__init__", "__eq__", "__hash__", "__repr__", "__setattr__", "__delattr__"})


def _build(cls: Any, frozen: bool) -> Any:
    written = sorted(_MADE & cls.__dict__.keys())
    if written:  # a dataclass keeps such a method; replacing it would change what == or hash() mean unseen
        raise TypeError(f"{cls.__qualname__} defines {written[0]}, which @record makes")
    own = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 - inspect is what this module avoids loading
    made: list[Field] = []
    for name in own:
        value = cls.__dict__.get(name, MISSING)
        f = value if isinstance(value, Field) else Field(value, MISSING, True, True)
        f.name = name
        if f.default is not MISSING:
            setattr(cls, name, f.default)
        elif isinstance(value, Field):
            delattr(cls, name)
        made.append(f)
    seen_default = False
    for f in made:
        if seen_default and f.default is MISSING and f.factory is MISSING:
            raise TypeError(f"{cls.__qualname__}: field {f.name!r} without a default follows one with a default")
        seen_default = seen_default or f.default is not MISSING or f.factory is not MISSING
    cls.__record_fields__ = tuple(made)
    setattr(cls, "__match_args__", tuple(f.name for f in made))  # noqa: B010 - mypy refuses the attribute form
    for name in _NAMES[frozen]:
        setattr(cls, name, _stand_in(cls, name, frozen))
    shown = [f.name for f in made if f.repr]

    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in shown)
        return f"{type(self).__qualname__}({inner})"

    cls.__repr__ = __repr__
    if frozen:
        cls.__setattr__ = _refuse_set
        cls.__delattr__ = _refuse_del
    else:
        cls.__hash__ = None
    return cls


_NAMES = {False: ("__init__", "__eq__"), True: ("__init__", "__eq__", "__hash__")}


def _stand_in(cls: Any, name: str, frozen: bool) -> Any:
    """What stands for `cls`'s method `name` until the class is first used: it compiles the class's methods then.

    A one-shot `snapshots capture` imports 27 records and makes 12 of them; compiling the other 15 was ~2 ms of its
    ~50 (issue 35's row (e)). Two threads may compile the same class at once: both install equal methods."""

    def first_use(self: Any, *args: Any, **kwargs: Any) -> Any:
        if cls.__dict__.get(name) is first_use:
            _compile(cls, frozen)
        return cls.__dict__[name](self, *args, **kwargs)

    first_use.__qualname__ = f"{cls.__qualname__}.{name}"
    first_use.__stand_in__ = True  # type: ignore[attr-defined]
    return first_use


def _compile(cls: Any, frozen: bool) -> None:
    for made_name, method in _methods(cls, list(cls.__record_fields__), frozen).items():
        setattr(cls, made_name, method)


def compile_waiting(modules: Iterable[Any]) -> None:
    """Compile the methods of every record `modules` define at their top level now: a resident server does before it
    forks its workers, which would each compile those of the records their command makes again (~1.5 ms of a served
    capture's ~35). (No list of the records built: the store keeps no process-wide state, tests/test_process_state.py.)
    """
    for module in modules:
        for value in list(vars(module).values()):
            if isinstance(value, type) and getattr(value.__dict__.get("__init__"), "__stand_in__", False):
                _compile(value, value.__dict__.get("__setattr__") is _refuse_set)  # frozen: refuses assignment


def _methods(cls: Any, made: list[Field], frozen: bool) -> dict[str, Any]:
    """Compile the class's `__init__`, `__eq__` and, frozen, `__hash__` in one `exec`: generated code runs as fast as
    a dataclass's (closures over attrgetter were ~1.5x slower to compare and hash)."""
    params, body = [], []
    scope: dict[str, Any] = {"MISSING": MISSING, "_set": object.__setattr__}
    for f in made:
        if f.default is not MISSING:
            scope[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
            value = f.name
        elif f.factory is not MISSING:
            scope[f"_f_{f.name}"] = f.factory
            params.append(f"{f.name}=MISSING")
            value = f"_f_{f.name}() if {f.name} is MISSING else {f.name}"
        else:
            params.append(f.name)
            value = f.name
        body.append(f"_set(self, {f.name!r}, {value})" if frozen else f"self.{f.name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    compared = [f.name for f in made if f.compare]
    mine = "".join(f"self.{n}," for n in compared)
    theirs = "".join(f"other.{n}," for n in compared)
    source = (f"def __init__(self, {', '.join(params)}):\n    " + "\n    ".join(body or ["pass"]) + "\n"
              "def __eq__(self, other):\n"
              "    if other.__class__ is self.__class__:\n"
              f"        return ({mine}) == ({theirs})\n"
              "    return NotImplemented\n"
              f"def __hash__(self):\n    return hash(({mine}))\n")
    exec(source, scope)  # the source is built above from the class's own field names
    for name in _NAMES[frozen]:
        scope[name].__qualname__ = f"{cls.__qualname__}.{name}"
    return {name: scope[name] for name in _NAMES[frozen]}


def _refuse_set(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_del(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def replace(rec: _T, /, **changes: Any) -> _T:
    """A new record of the same class with `changes` applied (as dataclasses.replace)."""
    cls: Any = type(rec)
    names = {f.name for f in cls.__record_fields__}
    unknown = set(changes) - names
    if unknown:
        raise TypeError(f"{cls.__qualname__} has no field {sorted(unknown)[0]!r}")
    made: _T = cls(**{n: changes[n] if n in changes else getattr(rec, n) for n in names})
    return made


if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    import collections

    _KEPT = frozenset({"__module__", "__name__", "__annotations__"})
    _REFUSED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults", "_make",
                          "_replace", "_asdict", "_source"})

    class _TupleMeta(type):
        """`class X(NamedTuple)` as typing's makes it, less the check of each annotation: with postponed annotations
        typing compiles every one (a ForwardRef), ~0.1 ms a class, 19 of them in a one-shot capture's imports (~1.5
        ms of ~47, issue 35's row (e)). Type checkers see typing's."""

        def __new__(mcls, typename, bases, ns):
            if ns.get("_root"):
                return super().__new__(mcls, typename, bases, ns)
            if bases != (NamedTuple,):
                raise TypeError("can only inherit from a NamedTuple type")
            types = ns.get("__annotations__", {})
            defaults = []
            for name in types:
                if name in ns:
                    defaults.append(ns[name])
                elif defaults:
                    raise TypeError(f"Non-default namedtuple field {name} cannot follow default field"
                                    f"{'s' if len(defaults) > 1 else ''} {', '.join(n for n in types if n in ns)}")
            made = collections.namedtuple(typename, types, defaults=defaults, module=ns["__module__"])
            made.__annotations__ = made.__new__.__annotations__ = dict(types)
            for key, value in ns.items():
                if key in _REFUSED:
                    raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
                if key not in _KEPT and key not in made._fields:
                    setattr(made, key, value)
            return made

    class NamedTuple(metaclass=_TupleMeta):
        """Base of a named tuple class (typing.NamedTuple's class syntax)."""

        _root = True
