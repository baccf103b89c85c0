"""A `sitecustomize` for a real codexr process that counts the cyclic collector's passes while modules of ours are
imported (`PROBE_MODULE`: path suffixes such as `/app/session.py`, comma-separated), and says at exit whether the
collector is on: `<passes> <1|0> <argv>` in `$PROBE_OUT/<pid>.txt` (tests/test_server.py, tests/test_tui_tmux.py)."""

MODULE_IMPORT_PROBE = """
import atexit, gc, os, sys
_during = []
_modules = tuple(os.environ["PROBE_MODULE"].split(","))
def _count(phase, info):
    frame = sys._getframe(1)
    while phase == "start" and frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_code.co_filename.endswith(_modules):
            _during.append(info["generation"])
            return
        frame = frame.f_back
gc.callbacks.append(_count)
def _report():
    with open(os.path.join(os.environ["PROBE_OUT"], f"{os.getpid()}.txt"), "w") as out:
        out.write(f"{len(_during)} {int(gc.isenabled())} {' '.join(sys.argv[1:])}")
atexit.register(_report)
"""
