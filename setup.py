"""The compiled parts of the data center, each with its Python twin beside it (the same results,
slower), everything else being declared in pyproject.toml:

- app/services/_copyrows.c: binary COPY rows (app.services.copytext);
- app/services/_msgcolumns.c: a batch's msgpack columns read and checked (app.services.batches);
- edge/_overview.c: overview blocks cut into columns, and the dot-line search of NNTP replies
  (edge.overview, edge.nntp; edge/setup.py builds it where the edge installs alone).

Optional: where no C compiler is at hand the install goes on and the Python twins serve."""
from setuptools import Extension, setup

FLAGS = ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]

setup(ext_modules=[
    Extension(f"app.services.{name}", [f"app/services/{name}.c"], optional=True, extra_compile_args=FLAGS)
    for name in ("_copyrows", "_msgcolumns")
] + [Extension("edge._overview", ["edge/_overview.c"], optional=True, extra_compile_args=FLAGS)])
