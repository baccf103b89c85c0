"""The command line's command groups (app/cli.py builds the parser from them): exec, threads, rewind and redo;
snapshots; history; config; the resident server; the proxy; the app; doctor; the demo; and what each command needs
(context) and how it ends (exits)."""
