"""Markers for tests that need an optional LP solver."""

import pytest

from a2a_compiler.solve.lp import hipo_available

#: HiPO needs the hipo extra (highspy-extras of highspy's own release); .ci/run installs it in an
#: environment of its own and runs the tests marked ``hipo`` there.
needs_hipo = [pytest.mark.hipo,
              pytest.mark.skipif(not hipo_available(), reason="HiPO needs highspy-extras of highspy's own "
                                 "release (pip install '.[hipo]'); .ci/run runs this in its hipo environment")]
