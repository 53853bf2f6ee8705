"""deeprepo's version, in one place (the package face re-exports it as ``__version__``)."""

VERSION = "0.1.0"
