"""A simulated InfiniBand fabric for checking exported tables against the real subnet manager.

``ibsim`` (Debian ``ibsim-utils``) simulates the switches and CAs of a net file
and answers management datagrams; OpenSM (``opensm``) and the diagnostics
(``infiniband-diags``: ``ibnetdiscover``, ``dump_fts``) attach to it through the
``libumad2sim.so`` LD_PRELOAD shim.  :class:`SimulatedFabric` runs one such
fabric from a topology: its own socket name (``IBSIM_SOCKNAME``), its own
directory for OpenSM's cache, log and dumps, every process started by it
stopped by its PID on success, error, timeout and SIGINT/SIGTERM/SIGHUP.
:func:`round_trip` is the whole check of issue #23:

    ibnetdiscover -> a2a routes ibnet:... --lft -> opensm -R file -U ... -> dump_fts

with the tables read back compared with ours, and OpenSM's own engines run on
the same fabric for comparison.
"""

from .simulator import (SimulatedFabric, OpenSMRun, RoundTrip, missing_tools, round_trip, compare_engine,
                        UMAD2SIM_PATHS)

__all__ = ["SimulatedFabric", "OpenSMRun", "RoundTrip", "missing_tools", "round_trip", "compare_engine",
           "UMAD2SIM_PATHS"]
