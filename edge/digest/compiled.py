"""Which implementation of the compiled parts runs: C, or their Python twins.

The compiled parts are edge/digest/_overview.c (the edge's digest) and the data center's
app/services/_copyrows.c and app/services/_msgcolumns.c; each has a Python twin that gives the same
results, 1.5 to 10 times slower. SEED_IMPL chooses, once per process, as psycopg's PSYCOPG_IMPL
does:

- ``SEED_IMPL=c``: the compiled parts, and an ImportError where one is not built (an install
  that was meant to be fast is not silently slow);
- ``SEED_IMPL=python``: the Python twins everywhere, built or not;
- unset: each compiled part where it is built, else its twin.

``IMPL`` tells which runs ("c" or "python"; unset, "c" when the edge's compiled part is built,
the one every digest runs through); every module with a compiled part gets it from
``load``, which refuses a stale build (``VERSIONS``); /healthz says which part runs, module by
module. This module and the settings objects (app.config, edge.node.config) are the only ones
that read os.environ: the choice must be made when the first module that has a compiled part is
imported, before any settings object exists, and it must be the same for every module of the
process.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

CHOICES = ("c", "python")
# The edge's compiled part: whether it is built decides IMPL when SEED_IMPL is not set.
DIGEST_MODULE = "edge.digest._overview"
# Each compiled part's interface version, as this Python code expects it (its C source's
# INTERFACE_VERSION, the built module's VERSION). A build with another is stale, made from other
# sources than the Python beside it, and loading it is an error whatever SEED_IMPL says (as
# SABnzbd refuses a sabctools of another version): it would be called with what it does not take.
VERSIONS = {"edge.digest._overview": 1, "app.services._copyrows": 2, "app.services._msgcolumns": 1}


class StaleBuild(RuntimeError):
    """A compiled part built from other sources than the Python code loading it."""


def _requested(value: str | None) -> str | None:
    """SEED_IMPL's value as a choice, None when it is unset or empty."""
    if not value:
        return None
    choice = value.strip().lower()
    if choice not in CHOICES:
        raise ValueError(f"SEED_IMPL must be 'c' or 'python' (or unset), not {value!r}")
    return choice


def _built(module_name: str) -> bool:
    try:
        importlib.import_module(module_name)
    except ImportError:
        return False
    return True


REQUESTED = _requested(os.environ.get("SEED_IMPL"))
IMPL = REQUESTED or ("c" if _built(DIGEST_MODULE) else "python")


def load(module_name: str) -> ModuleType | None:
    """The compiled module named (e.g. "edge.digest._overview"), or None when its Python twin is
    to run: SEED_IMPL=python, or SEED_IMPL unset and the module not built. With SEED_IMPL=c, a
    module that is not built is an ImportError."""
    if IMPL == "python":
        return None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if REQUESTED == "c":
            raise ImportError(
                f"SEED_IMPL=c but {module_name} is not built ({exc}): build it "
                "(ops/setup, or pip install with a C compiler at hand) or set SEED_IMPL=python"
            ) from exc
        return None
    return checked(module)


def checked(module: ModuleType) -> ModuleType:
    """The compiled module, if its VERSION is the one this code expects; else StaleBuild."""
    expected, built = VERSIONS[module.__name__], getattr(module, "VERSION", None)
    if built != expected:
        raise StaleBuild(
            f"{module.__name__} ({module.__file__}) is a stale build: interface version {built}, this code"
            f" needs {expected}; build it again (ops/setup, or pip install -e . and ./edge) or set SEED_IMPL=python"
        )
    return module
