"""The edge's compiled part, with its Python twin beside it (the same results, slower),
everything else being declared in pyproject.toml: edge/_overview.c cuts overview blocks into
columns (edge.overview) and finds dot lines in NNTP replies (edge.nntp).

Optional: where no C compiler is at hand the install goes on and the Python twins serve."""
from setuptools import Extension, setup
from setuptools.command.build_py import build_py


class WithoutThisFile(build_py):
    """The package is this directory: everything in it but this build script."""

    def find_package_modules(self, package, package_dir):
        return [found for found in super().find_package_modules(package, package_dir) if found[1] != "setup"]


setup(
    cmdclass={"build_py": WithoutThisFile},
    ext_modules=[Extension("edge._overview", ["_overview.c"], optional=True,
                           extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"])],
)
