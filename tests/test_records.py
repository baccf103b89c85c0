"""snapshot_store/records.py: the records a one-shot command's modules use behave as the dataclasses they replaced."""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from snapshot_store.detect.walkstate import WalkState
from snapshot_store.records import (
    FrozenInstanceError,
    NamedTuple,
    asdict,
    astuple,
    compile_waiting,
    field,
    fields,
    record,
    replace,
)
from snapshot_store.settings import ScopeSettings


@record(frozen=True)
class Point:
    """A frozen record with a plain default, a shared immutable default and a field == ignores."""

    x: int
    y: int = 0
    tags: frozenset[str] = field(default=frozenset())
    note: str = field(default="", repr=False, compare=False)


@record
class Bag:
    """A mutable record whose defaults come from factories."""

    items: list[int] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)
    count: int = 0


def test_a_record_is_built_from_positions_keywords_and_defaults() -> None:
    p = Point(1, tags=frozenset({"a"}))
    assert (p.x, p.y, p.tags, p.note) == (1, 0, frozenset({"a"}), "")
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1, 2, frozenset(), "", "extra")  # type: ignore[call-arg]


def test_equality_and_hash_follow_the_compared_fields_and_the_class() -> None:
    assert Point(1, 2) == Point(1, 2, note="other") and hash(Point(1, 2)) == hash(Point(1, 2, note="other"))
    assert Point(1, 2) != Point(2, 1)
    assert Point(1, 2) != (1, 2, frozenset())  # type: ignore[comparison-overlap]  # not a tuple
    assert len({Point(1), Point(1), Point(2)}) == 2


def test_a_frozen_record_refuses_assignment_and_a_mutable_one_is_unhashable() -> None:
    p = Point(1)
    with pytest.raises(FrozenInstanceError):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del p.y
    assert p.x == 1
    b = Bag()
    b.count = 3
    assert b.count == 3
    with pytest.raises(TypeError):
        hash(b)


def test_each_record_gets_its_own_factory_made_default() -> None:
    a, b = Bag(), Bag()
    a.items.append(1)
    a.seen["k"] = 1
    assert b.items == [] and b.seen == {}
    given = [7]
    assert Bag(given).items is given


def test_repr_shows_the_shown_fields() -> None:
    assert repr(Point(1, 2)) == "Point(x=1, y=2, tags=frozenset())"
    assert repr(Bag()) == "Bag(items=[], seen={}, count=0)"


def test_fields_astuple_and_replace() -> None:
    p = Point(1, 2)
    assert [f.name for f in fields(Point)] == ["x", "y", "tags", "note"]
    assert astuple(p) == (1, 2, frozenset(), "")
    q = replace(p, y=5)
    assert (q.x, q.y) == (1, 5) and p.y == 2 and type(q) is Point
    with pytest.raises(TypeError, match="no field 'z'"):
        replace(p, z=1)


def test_a_field_without_a_default_after_one_with_a_default_is_refused() -> None:
    with pytest.raises(TypeError, match="without a default"):
        @record
        class Bad:
            a: int = 0
            b: int  # type: ignore[misc]


def test_a_default_and_a_factory_together_are_refused() -> None:
    with pytest.raises(ValueError, match="not both"):
        field(default=1, default_factory=int)  # type: ignore[call-overload]


def test_post_init_runs_after_the_fields_are_set() -> None:
    @record
    class Checked:
        n: int

        def __post_init__(self) -> None:
            if self.n < 0:
                raise ValueError("negative")

    assert Checked(1).n == 1
    with pytest.raises(ValueError, match="negative"):
        Checked(-1)


def test_the_stores_records_keep_their_class_defaults() -> None:
    """ScopeSettings' defaults are read from the class by config's loader; WalkState's private fields round-trip."""
    assert ScopeSettings.residue_max_files == ScopeSettings().residue_max_files == 100
    assert ScopeSettings() == ScopeSettings() and hash(ScopeSettings()) == hash(ScopeSettings())
    names = [f.name for f in fields(WalkState)]
    assert "_seen" in names and names == list(WalkState.__match_args__)


def test_asdict_makes_nested_records_dicts_and_rebuilds_their_containers() -> None:
    """What history's JSON is written from (a rollout digest: a record holding records in a list and a dict)."""

    @record
    class Outer:
        point: Point
        bags: list[Bag]
        by_name: dict[str, Point]
        pair: tuple[int, Point]

    bag = Bag([1])
    outer = Outer(Point(1), [bag], {"p": Point(2, 3)}, (4, Point(5)))
    doc = asdict(outer)
    assert doc == {"point": {"x": 1, "y": 0, "tags": frozenset(), "note": ""},
                   "bags": [{"items": [1], "seen": {}, "count": 0}],
                   "by_name": {"p": {"x": 2, "y": 3, "tags": frozenset(), "note": ""}},
                   "pair": (4, {"x": 5, "y": 0, "tags": frozenset(), "note": ""})}
    doc["bags"][0]["items"].append(2)
    assert bag.items == [1]  # the lists are the dict's own


def test_a_method_the_record_makes_is_refused_when_the_class_writes_its_own() -> None:
    with pytest.raises(TypeError, match="defines __eq__, which @record makes"):
        @record
        class Mine:
            a: int

            def __eq__(self, other: object) -> bool:
                return True


def test_a_records_methods_are_compiled_when_it_is_first_made_not_when_imported() -> None:
    """Importing the store compiles no record's methods (a one-shot capture makes 12 of the 27 it imports: ~2 ms of
    compiling saved); the first record made compiles its class's, once, and they behave as before."""
    script = """
import snapshot_store.records as r
compiled = []
real = r._methods
r._methods = lambda cls, made, frozen: compiled.append(cls.__qualname__) or real(cls, made, frozen)
import snapshot_store.store
from snapshot_store.settings import ScopeSettings
print(compiled)
del compiled[:]
a, b = ScopeSettings(), ScopeSettings()
print(compiled, a == b, a is not b, ScopeSettings.__init__.__qualname__)
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).parents[1])
    assert res.returncode == 0, res.stderr
    at_import, first_made = res.stdout.split("\n")[:2]
    assert at_import == "['Folding']", res.stdout  # the one record the store's modules make as they are imported
    assert first_made == "['ScopeSettings'] True True ScopeSettings.__init__", res.stdout


def test_two_threads_making_a_new_record_at_once_both_get_it_right() -> None:
    @record(frozen=True)
    class Pair:
        a: int
        b: str = "b"

    barrier = threading.Barrier(8)
    made: list[Pair] = []

    def make(i: int) -> None:
        barrier.wait()
        made.append(Pair(i))

    threads = [threading.Thread(target=make, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(p.a for p in made) == list(range(8)) and {p.b for p in made} == {"b"}
    assert len({Pair(1), Pair(1)}) == 1 and Pair(1) != Pair(2)


class Span(NamedTuple):
    """A named tuple as the store declares them."""

    start: int
    name: str = "all"
    tags: tuple[str, ...] = ()

    def width(self) -> int:
        return len(self.name) + self.start


def test_a_named_tuple_behaves_as_typings() -> None:
    s = Span(2)
    assert s == (2, "all", ()) and isinstance(s, tuple) and s.width() == 5
    assert (Span._fields, Span._field_defaults) == (("start", "name", "tags"), {"name": "all", "tags": ()})
    assert s._replace(name="x") == Span(2, "x") and Span._make([1, "b", ("t",)]).tags == ("t",)
    assert (Span.__doc__, Span.__qualname__, Span.__module__) == ("A named tuple as the store declares them.", "Span",
                                                                 __name__)
    assert repr(s) == "Span(start=2, name='all', tags=())" and pickle.loads(pickle.dumps(s)) == s
    assert list(Span.__annotations__) == ["start", "name", "tags"]
    with pytest.raises(TypeError, match="Non-default namedtuple field b cannot follow default field a"):
        class Bad(NamedTuple):
            a: int = 1
            b: int  # type: ignore[misc]
    with pytest.raises(AttributeError, match="Cannot overwrite NamedTuple attribute _make"):
        class Worse(NamedTuple):
            a: int

            def _make(self) -> None:  # type: ignore[override]
                pass


def test_importing_the_store_checks_no_annotation() -> None:
    """typing.NamedTuple compiles each postponed annotation (a ForwardRef, ~20-40 us): ~80 in a one-shot capture's
    imports; the store's named tuples make none."""
    script = """
import typing
made = []
real = typing._type_convert
def counting(arg, *a, **k):
    if isinstance(arg, str):
        made.append(arg)
    return real(arg, *a, **k)
typing._type_convert = counting
import snapshot_store.store, snapshot_store.capture, snapshot_store.restore, snapshot_store.maint.gc
print(len(made), made[:5])
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).parents[1])
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "0 []", res.stdout


def test_a_resident_server_compiles_every_record_before_it_forks() -> None:
    """A worker would compile the methods of each record its command makes (~1.5 ms of a served capture): the
    server's preload compiles them all once."""
    script = """
from app.server.server import preload
preload()
import snapshot_store.records as r
import snapshot_store.store
from snapshot_store.settings import ScopeSettings
from snapshot_store.detect.walkstate import WalkState
print([c.__qualname__ for c in (ScopeSettings, WalkState) if getattr(c.__dict__["__init__"], "__stand_in__", False)])
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).parents[1])
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]", res.stdout


def test_compile_waiting_compiles_what_no_one_made_yet() -> None:
    @record
    class Later:
        a: int
        b: list[int] = field(default_factory=list)

    @record(frozen=True)
    class Fixed:
        a: int

    assert getattr(Later.__dict__["__init__"], "__stand_in__", False)
    holder = type(sys)("holder")
    holder.Later, holder.Fixed = Later, Fixed  # type: ignore[attr-defined]
    compile_waiting([holder])
    assert not getattr(Later.__dict__["__init__"], "__stand_in__", False)
    assert Later(1) == Later(1, []) and Later(1).b is not Later(1).b
    assert not getattr(Fixed.__dict__["__hash__"], "__stand_in__", False)  # compiled as frozen: hashable, fixed
    assert hash(Fixed(1)) == hash(Fixed(1)) and len({Fixed(1), Fixed(2)}) == 2
    with pytest.raises(FrozenInstanceError):
        Fixed(1).a = 2  # type: ignore[misc]
