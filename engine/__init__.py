"""tlgui's engine: the Cruz & Ramos Terrades line segmenter as a steppable library.

Stages, in pipeline order: :mod:`io` (load) -> :mod:`ink` -> :mod:`components` ->
:mod:`sampling` -> :mod:`graph` -> :mod:`regions` -> :mod:`initial_lines` ->
:mod:`em` (with :mod:`unary`, :mod:`message_passing`, :mod:`regression`) ->
:mod:`postprocess`; :mod:`metric` scores a result.  :mod:`pipeline` strings them together.
Never imports Qt.
"""

import os as _os

import numpy as _np

from .model import LineSet, Page, Preparation, Region, Segmentation, Snapshot
from .params import ParameterError, Parameters

# NumPy asks Linux for huge pages on large arrays; where the kernel then compacts memory on the
# fault (transparent_hugepage/defrag = madvise, as on this project's VMs) the first pass over
# each fresh 40 MB array of a page stalls: 3.0-3.2 s -> 2.6-2.8 s for the kraken page end to end,
# no change on bilevel pages. NUMPY_MADVISE_HUGEPAGE, when the user sets it, decides instead.
if "NUMPY_MADVISE_HUGEPAGE" not in _os.environ:
    try:
        _np._core.multiarray._set_madvise_hugepage(False)
    except AttributeError:  # a NumPy without the switch
        pass

__all__ = ["LineSet", "Page", "Parameters", "ParameterError", "Preparation", "Region",
           "Segmentation", "Snapshot"]
__version__ = "0.1.0"
