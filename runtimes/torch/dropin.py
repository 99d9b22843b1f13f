"""Drop-in use: ``install(schedule, group)`` makes unmodified ``dist.all_to_all_single`` calls run the schedule.

``install`` replaces ``torch.distributed.all_to_all_single`` and
``torch.distributed.all_to_all`` (in ``torch.distributed`` and
``torch.distributed.distributed_c10d``) by functions that run calls on the
installed group through :class:`~runtimes.torch.runtime.AllToAll` and pass
every other call (another group, a group of another size) to the originals,
hence to the backend, untouched.  The replacements are marked
``torch.compiler.disable``: a compiled model breaks its graph at the call and
runs it eagerly, through the schedule.  Why wrapping and not a registered
backend: docs/torch.md.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from a2a_compiler.errors import A2AError

from .runtime import AllToAll, say_once

_MODULES = (dist, c10d)
_NAMES = ("all_to_all_single", "all_to_all")


class _Done:
    """What ``async_op=True`` returns: the schedule ran synchronously, so the work is complete."""

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True


class Installation:
    """An installed schedule: ``a2a`` (the :class:`AllToAll`) and how many calls it took (``taken``) and
    passed on (``passed``); :meth:`uninstall` (or leaving a ``with`` block) restores the originals."""

    def __init__(self, a2a: AllToAll):
        self.a2a = a2a
        self.taken = self.passed = 0
        self._original = {name: getattr(dist, name) for name in _NAMES}
        if any(getattr(m, n) is not self._original[n] for m in _MODULES for n in _NAMES):
            raise A2AError("torch.distributed.all_to_all_single is already replaced (a schedule is installed); "
                           "uninstall it first")
        self._installed = {"all_to_all_single": self._wrap_single(), "all_to_all": self._wrap_list()}
        for m in _MODULES:
            for name, fn in self._installed.items():
                setattr(m, name, fn)

    def covers(self, group) -> bool:
        """Does a call on ``group`` (``None``: the default group) run the schedule?"""
        group = dist.group.WORLD if group is None else group
        return group is self.a2a.group or group == self.a2a.group

    def _wrap_single(self):
        original = self._original["all_to_all_single"]

        @torch.compiler.disable
        def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                              async_op=False):
            if not self.covers(group):
                self.passed += 1
                return original(output, input, output_split_sizes, input_split_sizes, group, async_op)
            self.taken += 1
            self.a2a.all_to_all_single(output, input, output_split_sizes, input_split_sizes)
            return _Done() if async_op else None

        all_to_all_single.__doc__ = f"a2a-compiler's schedule on its group; otherwise:\n{original.__doc__}"
        return all_to_all_single

    def _wrap_list(self):
        original = self._original["all_to_all"]

        @torch.compiler.disable
        def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
            if not self.covers(group):
                self.passed += 1
                return original(output_tensor_list, input_tensor_list, group, async_op)
            self.taken += 1
            self.a2a.all_to_all(output_tensor_list, input_tensor_list)
            return _Done() if async_op else None

        all_to_all.__doc__ = f"a2a-compiler's schedule on its group; otherwise:\n{original.__doc__}"
        return all_to_all

    def uninstall(self) -> None:
        """Put the original functions back (only those this installation replaced)."""
        for m in _MODULES:
            for name, fn in self._installed.items():
                if getattr(m, name) is fn:
                    setattr(m, name, self._original[name])

    def __enter__(self) -> Installation:
        return self

    def __exit__(self, *exc) -> None:
        self.uninstall()


def install(schedule, group=None, **options) -> Installation:
    """Run ``dist.all_to_all_single`` and ``dist.all_to_all`` calls on ``group`` (default: the world) through
    ``schedule`` from now on (collective over ``group``; ``options`` as :class:`AllToAll` takes them).

    Returns an :class:`Installation`, also a context manager that uninstalls on exit.  The group's rank 0
    says once, on stderr, which calls the schedule takes over.

    >>> a2a_compiler.torch.install("schedules/bipartite-4-mcf-extp.mpi.xml")   # doctest: +SKIP
    """
    a2a = AllToAll(schedule, group, **options)
    inst = Installation(a2a)
    backend = dist.get_backend(a2a.group)
    say_once(a2a.group, f"dist.all_to_all_single and dist.all_to_all on this group now run {a2a.describe()}; "
                        f"other groups and every other collective go to {backend} untouched")
    return inst
