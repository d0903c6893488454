"""The one compiled part of the data center: binary COPY rows at C speed (app/services/_copyrows.c).

Everything else is declared in pyproject.toml. Optional: where no C compiler is at hand the
install goes on, and app.services.copytext packs rows in Python (the same bytes, slower)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("app.services._copyrows", ["app/services/_copyrows.c"], optional=True,
                             extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"])])
