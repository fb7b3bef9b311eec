"""Build step for the one compiled module, tileblas._native (see src/tileblas/_native.c)."""
import numpy
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tileblas._native",
            sources=["src/tileblas/_native.c"],
            include_dirs=[numpy.get_include()],
            extra_compile_args=["-O2"],
        )
    ]
)
