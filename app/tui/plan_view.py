"""The preview pane the rewind picker, redo and snapshot dialogs share: the dry run's plan and each file's diff."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from snapshot_store.restore import DELETE, LEAVE, RMDIR, WRITE, Action

from ..codex.events import FileStat
from ..rewind.picks import kind_of, toggled
from ..services.driver import Preview
from ..shared.lines import plural
from .diffview import DiffView
from .labels import plan_line
from .lists import KeptList


def plan_actions(preview: Preview) -> list[Action]:
    """Every step of the plan, then what the dry run left alone beyond it (each with its reason)."""
    if preview.restore is None:
        return []
    actions = list(preview.restore.plan.actions)
    listed = {(a.op, a.path) for a in actions}
    actions += [a for a in preview.restore.left if (a.op, a.path) not in listed]
    return sorted(actions, key=lambda a: kind_of(a.reason) != "conflict")  # what needs a choice comes first


def plan_summary(preview: Preview) -> str:
    """`files: 2 files to write, 1 to delete, 3 to leave alone` for the dry run (nothing is written yet) — counted as
    the result will count them.

    Directories emptied by the rewind are named apart: the result's "deleted" counts files only.
    """
    acts = plan_actions(preview)
    written = sum(a.op == WRITE for a in acts)
    deleted = sum(a.op == DELETE for a in acts)
    dirs = sum(a.op == RMDIR for a in acts)
    left = sum(a.op == LEAVE for a in acts)
    notes = "".join(f"\nnote: {n}" for n in preview.restore.plan.notes) if preview.restore else ""
    if not acts:
        return "files: the workspace already matches — nothing to write or delete" + notes
    gone = f", {dirs} empty director{'y' if dirs == 1 else 'ies'} to remove" if dirs else ""
    kinds = [kind_of(a.reason) for a in acts]
    ruled = [f"{n} {word}" for n, word in ((kinds.count("kept"), "of yours kept"), (kinds.count("merged"), "merged"),
                                          (kinds.count("conflict"), "in conflict (kept: Space to choose)")) if n]
    ruled_line = f"\n{', '.join(ruled)}" if ruled else ""
    return (f"files: {plural(written, 'file')} to write, {deleted} to delete, {left} to leave alone{gone}" + ruled_line
            + notes)


class PlanView(Vertical):
    """The plan (files written, deleted, left alone, each with its reason) and the diff of the highlighted file;
    where `choosable` (a rewind's, a redo's), Space toggles the highlighted file in or out (owners.toggled)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("space", "toggle_file", "File in/out", show=False)]

    def __init__(self, choosable: bool = False, **kwargs: str) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._diffs: dict[str, tuple[FileStat, str]] = {}
        self._actions: list[Action] = []
        self.choosable = choosable
        self.choices: dict[str, str] = {}
        """The user's choice per file (path -> owners.MINE / REWOUND / BOTH), passed to the rewind or redo."""

    def compose(self) -> ComposeResult:
        yield Static("", id="plan-summary", markup=False)
        yield KeptList(id="plan-actions")
        with VerticalScroll(id="plan-diff-scroll", can_focus=False):
            yield DiffView("", id="plan-diff")

    def show(self, preview: Preview | None, note: str = "") -> None:
        """Show a dry run (or only `note`, e.g. `loading…` or why files are not touched)."""
        actions = plan_actions(preview) if preview is not None else []
        self._actions = actions
        self._diffs = dict(preview.diffs) if preview is not None else {}
        summary = plan_summary(preview) if preview is not None and preview.restore is not None else ""
        warnings = "\n".join((*preview.warnings, *preview.notes)) if preview is not None else ""
        self.query_one("#plan-summary", Static).update("\n".join(t for t in (warnings, note, summary) if t))
        listing = self.query_one("#plan-actions", OptionList)
        self.choices = {p: c for p, c in self.choices.items() if any(a.path == p for a in actions)}
        listing.set_options(self._option(i, a) for i, a in enumerate(actions))
        listing.display = bool(actions)
        self.query_one("#plan-diff-scroll").display = bool(actions)
        if actions:
            first = next((i for i, a in enumerate(actions) if a.path in self._diffs), 0)
            listing.highlighted = first
            self._show_diff(first)

    def _option(self, index: int, act: Action) -> Option:
        return Option(Content(plan_line(act, self._diffs.get(act.path, (None, ""))[0], self.choices.get(act.path))),
                      id=str(index))

    def action_toggle_file(self) -> None:
        """Space: the highlighted file's next choice (its row says which)."""
        listing = self.query_one("#plan-actions", OptionList)
        index = listing.highlighted
        if not self.choosable or index is None or not 0 <= index < len(self._actions):
            return
        act = self._actions[index]
        choice = toggled(kind_of(act.reason), act.op, self.choices.get(act.path), act.path)
        if choice is None:
            self.choices.pop(act.path, None)
        else:
            self.choices[act.path] = choice
        listing.replace_option_prompt_at_index(index, self._option(index, act).prompt)

    def _show_diff(self, index: int) -> None:
        if not 0 <= index < len(self._actions):
            return
        act = self._actions[index]
        if act.path in self._diffs:
            text = self._diffs[act.path][1]
        elif act.op == LEAVE:
            text = f"(left alone: {act.reason})"
        else:
            text = f"({act.op} {act.path})"
        self.query_one("#plan-diff", DiffView).show(text)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        """Follow the highlighted plan line with its diff."""
        if event.option_list.id == "plan-actions":
            event.stop()
            self._show_diff(event.option_index)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Selecting a plan line only shows its diff (confirming is the dialog's key)."""
        if event.option_list.id == "plan-actions":
            event.stop()
            self._show_diff(event.option_index)
