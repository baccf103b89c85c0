"""The session's services: threads and their prompts, turns, the interactive driver, the choices sent with each
call, background terminals, what a turn changed."""
