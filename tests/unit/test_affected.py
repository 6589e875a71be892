"""`make changed` runs the tests a change touches (harness/affected.py)."""

from __future__ import annotations

from harness.affected import affected_tests


def test_a_module_selects_the_tests_that_import_it_and_no_others() -> None:
    picked = affected_tests(["pool/rules/stages/standby.py"])
    assert "tests/unit/test_reconciler_standby.py" in picked  # imports it
    assert "tests/unit/test_reconciler_planner.py" in picked  # through pool.rules.planner
    assert "tests/unit/test_certs_cli.py" not in picked


def test_a_changed_test_selects_itself_and_other_files_their_readers() -> None:
    assert affected_tests(["tests/unit/test_affected.py"]) == ["tests/unit/test_affected.py"]
    docs = affected_tests(["docs/concepts.md"])
    assert "tests/unit/test_docs_pages.py" in docs and "tests/unit/test_lock.py" not in docs
    assert affected_tests(["pyproject.toml"]) == ["tests/unit"]
    assert affected_tests(["bench/RESULTS.md"]) == []
