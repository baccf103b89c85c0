"""`/init`: the prompt that asks the agent for an AGENTS.md, sent as an ordinary (rewindable) prompt.

As in the official Codex TUI, a workspace that already has an AGENTS.md is left alone: the command says so and
sends nothing. The wording is codexr's own; the outline follows what the official TUI asks for.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SessionError

AGENTS_MD = "AGENTS.md"

INIT_PROMPT = """\
Generate a file named AGENTS.md that serves as a contributor guide for this repository.
Look at the project first, then write a short guide in Markdown (about 200-400 words) titled "Repository \
Guidelines", specific to this repository, with headings and concrete examples (commands, paths, naming patterns).

Cover what applies here and leave out what does not:
- Project structure and module organization: where the source code, the tests and any assets live.
- Build, test and development commands: how to build, test and run it locally, and what each command does.
- Coding style and naming conventions: indentation, formatting and lint tools, naming patterns.
- Testing guidelines: the test framework, how tests are named, how to run them.
- Commit and pull request guidelines: the conventions the Git history shows, what a pull request should include.

Add a section if the project needs one (security and configuration tips, an architecture overview, notes for \
agents). Keep the tone direct and instructional.
"""


def init_prompt(workspace: Path) -> str:
    """The /init prompt, or SessionError when the workspace already has an AGENTS.md (it is never overwritten)."""
    if (workspace / AGENTS_MD).exists():
        raise SessionError(f"{AGENTS_MD} already exists here. Skipping /init to avoid overwriting it.")
    return INIT_PROMPT
