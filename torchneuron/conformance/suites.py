"""The entries beyond OpInfo, run by the same workers: `module:<name>` (module_db, modules.py)
and `optim:<name>` (optim_db, optimizers.py), each a record shaped like an OpInfo entry's."""

from .modules import PREFIX as MODULE_PREFIX
from .optimizers import PREFIX as OPTIM_PREFIX


def is_suite_key(key):
    """True for a module or optimizer entry."""
    return key.startswith((MODULE_PREFIX, OPTIM_PREFIX))


def run_suite_entry(key, dtype_name, grad=True):
    """Runs one module or optimizer entry in this process and returns its record."""
    from .modules import module_infos, run_module_entry
    from .optimizers import optim_infos, run_optim_entry
    from .samples import _merge, _Placement
    from .workers import heartbeat
    entry = {"op": key, "dtype": dtype_name, "status": "skipped", "detail": "",
             "max_abs_err": None, "samples": 0, "float64_arbitrated": 0, "fallback": {},
             "native": []}
    place = _Placement()

    def merge(status, detail, err):
        _merge(entry, status, detail, err)
    if key.startswith(MODULE_PREFIX):
        entry["samples"] = run_module_entry(module_infos()[key], key, dtype_name, place, merge,
                                            heartbeat, grad)
    else:
        entry["samples"] = run_optim_entry(optim_infos()[key], dtype_name, place, merge, heartbeat)
    if entry["status"] == "skipped" and not entry["detail"]:
        entry["detail"] = "no inputs"
    if entry["status"] == "pass":
        entry["detail"] = ""
    entry["fallback"], entry["native"] = dict(sorted(place.fallback.items())), place.native()
    return entry
