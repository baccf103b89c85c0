"""The resident server's plumbing: the server that runs one-shot commands in forks of itself, where it lives and
how it starts (runtime), who may use it (confinement), and which command lines run there (oneshot)."""
