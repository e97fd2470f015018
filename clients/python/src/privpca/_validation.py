"""Checks of what the client uploads, made before any request.

A matrix is checked the way scikit-learn's own estimators check theirs: with
``sklearn.utils.validation.check_array`` when scikit-learn is installed (its wording, its
rules), otherwise by a numpy fallback that raises the same messages. Either way a refusal is a
:class:`privpca.InvalidInput` (a ``ValueError``), or scikit-learn's ``TypeError`` for sparse
input, and nothing has been sent.
"""

from __future__ import annotations

import inspect
import math
import re
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import InvalidInput

FloatArray = npt.NDArray[np.float64]

#: Column names pandas gives a CSV's empty header cells: ``df.to_csv(path)`` writes the index
#: under an empty name and ``pd.read_csv(path)`` reads it back as ``Unnamed: 0``.
_INDEX_COLUMN = re.compile(r"^(Unnamed: \d+)?$")

SPARSE_MESSAGE = (
    "Sparse data was passed for X, but dense data is required. Use '.toarray()' to convert to a dense numpy array."
)


def check_matrix(X: Any, *, estimator: Any = None, input_name: str = "X") -> FloatArray:
    """X as a 2-D, finite, non-empty float64 array, or a refusal in scikit-learn's words."""
    check_index_column(X)
    try:
        from sklearn.utils.validation import check_array
    except ImportError:
        return _fallback(X, input_name)
    finite = "ensure_all_finite" if "ensure_all_finite" in _parameters(check_array) else "force_all_finite"
    try:
        checked = check_array(
            X,
            accept_sparse=False,
            dtype=np.float64,
            ensure_2d=True,
            allow_nd=False,
            ensure_min_samples=1,
            ensure_min_features=1,
            estimator=estimator,
            input_name=input_name,
            **{finite: True},
        )
    except InvalidInput:
        raise
    except ValueError as error:
        raise InvalidInput(str(error), field=input_name) from error
    matrix: FloatArray = np.asarray(checked, dtype=np.float64)
    return matrix


def check_index_column(X: Any) -> None:
    """Refuse a DataFrame whose column names say it carries a pandas index as data."""
    columns = getattr(X, "columns", None)
    if columns is None:
        return
    for column in columns:
        if isinstance(column, str) and _INDEX_COLUMN.match(column.strip()):
            shown = repr(column)
            raise InvalidInput(
                f"X has a column named {shown}: that is what pandas calls a CSV's row index when the "
                "file was written with df.to_csv(path) (without index=False) and read back with "
                f"pd.read_csv(path). It would be uploaded as a feature. Drop it "
                f"(df.drop(columns=[{shown}])) or read the file with index_col=0.",
                field=input_name_of(column),
            )


def input_name_of(column: str) -> str:
    return f"X[{column!r}]"


def _parameters(function: Any) -> Mapping[str, Any]:
    try:
        return inspect.signature(function).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return {}


def _fallback(X: Any, input_name: str) -> FloatArray:
    """``check_array``'s checks and messages for a dense float64 matrix, without scikit-learn."""
    if _is_sparse(X):
        raise TypeError(SPARSE_MESSAGE)
    if hasattr(X, "to_numpy"):
        X = X.to_numpy()
    raw = np.asarray(X)
    if raw.dtype.kind == "c":
        raise InvalidInput(f"Complex data not supported\n{raw}\n", field=input_name)
    if raw.ndim == 0:
        raise InvalidInput(
            f"Expected 2D array, got scalar array instead:\narray={raw}.\n"
            "Reshape your data either using array.reshape(-1, 1) if your data has a single feature "
            "or array.reshape(1, -1) if it contains a single sample.",
            field=input_name,
        )
    if raw.ndim == 1:
        raise InvalidInput(
            f"Expected 2D array, got 1D array instead:\narray={raw}.\n"
            "Reshape your data either using array.reshape(-1, 1) if your data has a single feature "
            "or array.reshape(1, -1) if it contains a single sample.",
            field=input_name,
        )
    if raw.ndim >= 3:
        raise InvalidInput(f"Found array with dim {raw.ndim}, while dim <= 2 is required.", field=input_name)
    try:
        matrix = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise InvalidInput(str(error), field=input_name) from error
    if not np.isfinite(matrix).all():
        kind = "NaN" if np.isnan(matrix).any() else "infinity or a value too large for dtype('float64')"
        raise InvalidInput(f"Input {input_name} contains {kind}.", field=input_name)
    n, d = matrix.shape
    if n < 1:
        raise InvalidInput(
            f"Found array with 0 sample(s) (shape={matrix.shape}) while a minimum of 1 is required.", field=input_name
        )
    if d < 1:
        raise InvalidInput(
            f"Found array with 0 feature(s) (shape={matrix.shape}) while a minimum of 1 is required.", field=input_name
        )
    return matrix


def _is_sparse(X: Any) -> bool:
    # A scipy sparse matrix can only exist once scipy.sparse was imported.
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and bool(sparse.issparse(X))


# -- dataset settings ------------------------------------------------------------------------

KINDS = {"records": ("replace_one", "add_remove"), "matrix": ("entry",)}


def check_name(name: Any) -> str:
    """A dataset name as ``CreateDataset`` allows it: 1 to 200 characters, not only white
    space, no NUL."""
    if not isinstance(name, str):
        raise InvalidInput(f"name must be a string, got {type(name).__name__}", field="name")
    if not name.strip() or len(name) > 200 or "\x00" in name:
        raise InvalidInput("name must be 1 to 200 characters, not only white space, with no NUL character", field="name")
    return name


def positive(value: Any, field: str) -> float:
    """A finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidInput(f"{field} must be a number, got {value!r}", field=field)
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise InvalidInput(f"{field} must be a finite number > 0, got {value!r}", field=field)
    return number


def delta(value: Any, field: str) -> float:
    """A δ in (0, 1)."""
    number = positive(value, field)
    if number >= 1:
        raise InvalidInput(f"{field} must be in (0, 1), got {value!r}", field=field)
    return number
