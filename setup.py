"""Build step for the compiled modules: tileblas._native (the generic GIL-free BLAS caller) and
tileblas._fastpath (the small-call path of the Level-3 drop-in routines)."""
import numpy
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tileblas._native",
            sources=["src/tileblas/_native.c"],
            include_dirs=[numpy.get_include()],
            extra_compile_args=["-O2"],
        ),
        Extension(
            "tileblas._fastpath",
            sources=["src/tileblas/_fastpath.c"],
            include_dirs=[numpy.get_include()],
            extra_compile_args=["-O2"],
        ),
    ]
)
