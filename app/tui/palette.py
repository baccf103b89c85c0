"""The command palette's commands, from the action registry (so it lists what /help and the keys list)."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from .actions import ACTIONS, Action


def _name(a: Action) -> str:
    return f"{a.slash or a.id}: {a.description}"


class ActionCommands(Provider):
    """Every app-level action of the registry."""

    def _actions(self) -> list[Action]:
        return [a for a in ACTIONS if a.scope == "app" and a.id not in ("interrupt", "interrupt_or_quit")]

    async def search(self, query: str) -> Hits:
        """Fuzzy-match the registry's commands."""
        matcher = self.matcher(query)
        for a in self._actions():
            name = _name(a)
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), partial(self.app.run_action, a.method), help=a.key or None)

    async def discover(self) -> Hits:
        """All of them, when nothing is typed yet."""
        for a in self._actions():
            yield DiscoveryHit(_name(a), partial(self.app.run_action, a.method), help=a.key or None)
