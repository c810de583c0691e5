"""tlgui: watch and steer the Cruz & Ramos Terrades text-line segmentation of a page.

The package only draws and drives the method; every computation lives in :mod:`engine`.
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
