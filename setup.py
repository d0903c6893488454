"""The compiled parts of the data center, each with its Python twin beside it (the same results,
slower), everything else being declared in pyproject.toml:

- app/services/_copyrows.c: binary COPY rows (app.services.ingest.pgcopy);
- app/services/_msgcolumns.c: a batch's msgpack columns read and checked (app.services.ingest:
  checks, decode, hosts).

The edge's compiled part is built by its own distribution (edge/setup.py). Optional: where no C
compiler is at hand the install goes on and the Python twins serve."""
from setuptools import Extension, setup

FLAGS = ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]

setup(ext_modules=[
    Extension(f"app.services.{name}", [f"app/services/{name}.c"], optional=True, extra_compile_args=FLAGS)
    for name in ("_copyrows", "_msgcolumns")
])
