"""The compiled parts of the data center, each with its Python twin beside it (the same results,
slower), everything else being declared in pyproject.toml:

- app/services/_copyrows.c: binary COPY rows (app.services.ingest.pgcopy);
- app/services/_msgcolumns.c: a batch's msgpack columns read and checked (app.services.ingest:
  checks, decode, hosts).

The edge's compiled part is built by its own distribution (edge/setup.py). Required: an install
without a C compiler or Python's headers (Debian's python3-dev) stops with the compiler's error,
rather than going on with the Python twins unnoticed. `SEED_IMPL=python pip install ...` installs
without them, for the twins only (edge.digest.compiled)."""

import os

from setuptools import Extension, setup

FLAGS = ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
TWINS_ONLY = os.environ.get("SEED_IMPL", "").strip().lower() == "python"

setup(
    ext_modules=[]
    if TWINS_ONLY
    else [
        Extension(f"app.services.{name}", [f"app/services/{name}.c"], extra_compile_args=FLAGS)
        for name in ("_copyrows", "_msgcolumns")
    ]
)
