"""A `sitecustomize` for a real codexr process that counts the cyclic collector's passes while modules of ours are
imported, and says at exit whether the collector is on: `<passes> <1|0> <argv>` in `$PROBE_OUT/<pid>.txt`
(tests/test_server.py, tests/test_tui_tmux.py). A pass counts while one of the `PROBE_MODULE` modules (path
suffixes such as `/app/session.py`, comma-separated) runs its module code, or, with `PROBE_REPO` (the checkout's
path), while any module is imported for code of the checkout (not for Python's own start-up)."""

MODULE_IMPORT_PROBE = """
import atexit, gc, os, sys
_during = []
_modules = tuple(m for m in os.environ.get("PROBE_MODULE", "").split(",") if m)
_repo = os.environ.get("PROBE_REPO")
def _counted(frame):
    importing = False
    while frame is not None:
        name = frame.f_code.co_filename
        if _modules and frame.f_code.co_name == "<module>" and name.endswith(_modules):
            return True
        importing = importing or name.startswith("<frozen importlib")
        if _repo and importing and name.startswith(_repo):
            return True
        frame = frame.f_back
    return False
def _count(phase, info):
    if phase == "start" and _counted(sys._getframe(1)):
        _during.append(info["generation"])
gc.callbacks.append(_count)
def _report():
    with open(os.path.join(os.environ["PROBE_OUT"], f"{os.getpid()}.txt"), "w") as out:
        out.write(f"{len(_during)} {int(gc.isenabled())} {' '.join(sys.argv[1:])}")
atexit.register(_report)
"""
