"""The store on disk: its format, locks, refs and pins, packs and their indexes, snapshot records (FORMAT.md)."""
