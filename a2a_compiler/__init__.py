"""a2a-compiler: bandwidth-optimal all-to-all schedules for direct-connect topologies (Basu et al., HPDC 2024).

``a2a_compiler.compile(spec, emit="msccl", ...)`` runs the whole pipeline and
returns a :class:`~a2a_compiler.compiler.CompileResult`; the ``a2a`` command is a
thin layer over it.  Bad input raises :class:`A2AError`.  Importing the package is cheap: stages load on
first use.
"""

from .errors import A2AError

__all__ = ["compile", "CompileResult", "A2AError", "__version__"]


def __getattr__(name):
    if name in ("compile", "CompileResult"):
        from . import compiler

        return getattr(compiler, name)
    if name == "__version__":  # looked up on demand: importing the package stays cheap
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("a2a-compiler")
        except PackageNotFoundError:  # a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    """The API (:data:`__all__`, whose members load on first use) beside what the module already holds."""
    return sorted(set(globals()) | set(__all__))
