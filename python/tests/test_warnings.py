"""The suites run with warnings as errors (python/pyproject.toml,
[tool.pytest.ini_options]): a new warning fails a test instead of joining
a summary nobody reads; the two expected ones are filtered."""

import warnings

import pytest


def test_warnings_are_errors():
    with pytest.raises(UserWarning, match="new warning"):
        warnings.warn("a new warning", UserWarning)
    with pytest.raises(ResourceWarning):
        warnings.warn("an unclosed file", ResourceWarning)


@pytest.mark.parametrize("message,category", [
    ("This process (pid=123) is multi-threaded, use of fork() may lead to deadlocks in the child.", DeprecationWarning),
    ("This DataLoader will create 4 worker processes in total. Our suggested max number of worker in current "
     "system is 2, which is smaller than what this DataLoader is going to create.", UserWarning),
])
def test_expected_warnings_are_filtered(message, category):
    with warnings.catch_warnings(record=True) as got:
        warnings.warn(message, category)
    assert got == []  # ignored by the configured filter, not recorded
