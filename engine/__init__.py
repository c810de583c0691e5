"""tlgui's engine: the Cruz & Ramos Terrades line segmenter as a steppable library.

Stages, in pipeline order: :mod:`io` (load) -> :mod:`ink` -> :mod:`components` ->
:mod:`sampling` -> :mod:`graph` -> :mod:`regions` -> :mod:`initial_lines` ->
:mod:`em` (with :mod:`unary`, :mod:`message_passing`, :mod:`regression`) ->
:mod:`postprocess`; :mod:`metric` scores a result.  :mod:`pipeline` strings them together.
Never imports Qt.
"""

from .model import LineSet, Page, Preparation, Region, Segmentation, Snapshot
from .params import ParameterError, Parameters

__all__ = ["LineSet", "Page", "Parameters", "ParameterError", "Preparation", "Region",
           "Segmentation", "Snapshot"]
__version__ = "0.1.0"
