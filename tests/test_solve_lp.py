"""solve_lp's acceptance rule: an optimal model, or with ``inexact_ok`` an "Unknown" one that carries both
points (IPX or PDLP stopped just outside HiGHS's own tolerances); anything else is one clear error."""

from dataclasses import replace

import highspy
import numpy as np
import pytest
import scipy.sparse as sp

from a2a_compiler.errors import A2AError
from a2a_compiler.solve import lp

# max x + y  s.t.  x + 2y <= 4,  3x + y <= 6: optimum (1.6, 1.2), objective 2.8
C = np.array([1.0, 1.0])
A = sp.csc_array(np.array([[1.0, 2.0], [3.0, 1.0]]))
UPPER = np.array([4.0, 6.0])


def solve(**kw):
    return lp.solve_lp(C, A, -np.inf, UPPER, maximize=True, solver="ipm", **kw)


@pytest.fixture
def unknown_status(monkeypatch):
    """HiGHS's real outcome, reported as "Unknown" (what IPX says when it stops imprecise)."""
    real = lp._Outcome.of
    monkeypatch.setattr(lp._Outcome, "of", classmethod(lambda cls, h: replace(
        real(h), model_status=int(highspy.HighsModelStatus.kUnknown), status="Unknown")))


def test_an_optimal_lp_returns_its_optimum():
    res = solve()
    assert res.status == "Optimal"
    np.testing.assert_allclose(res.x, [1.6, 1.2], rtol=0, atol=1e-7)
    assert res.objective == pytest.approx(2.8, abs=1e-7)


def test_an_unknown_status_is_refused_unless_inexact_ok(unknown_status):
    with pytest.raises(A2AError, match=r"^LP solver finished with status 'Unknown' \(2 rows, 2 columns\)$"):
        solve()


def test_inexact_ok_takes_the_point_of_an_unknown_status(unknown_status):
    res = solve(inexact_ok=True)
    assert res.status == "Unknown"
    np.testing.assert_allclose(res.x, [1.6, 1.2], rtol=0, atol=1e-7)
    np.testing.assert_allclose(res.row_value, [4.0, 6.0], rtol=0, atol=1e-7)


def test_inexact_ok_still_refuses_an_infeasible_lp():
    with pytest.raises(A2AError, match=r"^LP solver finished with status 'Infeasible' \(2 rows, 2 columns\)$"):
        lp.solve_lp(C, A, np.array([5.0, -np.inf]), UPPER, maximize=True, solver="ipm", inexact_ok=True)
