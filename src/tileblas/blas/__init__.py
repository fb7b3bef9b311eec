"""Drop-in replacement for :mod:`scipy.linalg.blas`.

Every routine of scipy.linalg.blas under the same name, signature, defaults, return values and in-place /
``overwrite_*`` semantics, computed by tileblas' GIL-free kernel layer; Level-3 routines run on the tile
runtime.  Switch ``from scipy.linalg import blas`` to ``from tileblas import blas`` and nothing else
changes.
"""

from tileblas.blas._level1 import *  # noqa: F401,F403
from tileblas.blas._level1 import __all__ as _all1
from tileblas.blas._level2 import *  # noqa: F401,F403
from tileblas.blas._level2 import __all__ as _all2
from tileblas.blas._level3 import *  # noqa: F401,F403
from tileblas.blas._level3 import __all__ as _all3
from tileblas.blas._getfuncs import *  # noqa: F401,F403
from tileblas.blas._getfuncs import __all__ as _allg

__all__ = [*_allg, *_all1, *_all2, *_all3]

# The runtime's modules, the default runtime, the one-thread OpenBLAS instance and the C path's
# configuration, which the first Level-3 call needs: made here, with the drop-in, as SciPy loads its OpenBLAS
# at import, so that the first call of a process costs what the calls after it do (_dispatch.preload).
from tileblas.runtime import _runtime  # noqa: E402
from tileblas.blas import _dispatch  # noqa: E402

_dispatch.preload()
del _runtime
