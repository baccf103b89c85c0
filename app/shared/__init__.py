"""What every front end shares: line mode, the one wording of a plan and its counts (lines), the slash-command
registry, the vocabulary of modes and kinds, times, and the replay of a recorded session."""
