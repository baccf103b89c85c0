"""codexr: the session core and its thin front ends."""
