"""docs/tutorial.md's shape as tests/e2e/test_tutorial_e2e.py reads it, and the
normalising that comparison relies on."""

from __future__ import annotations

from tests.tutorialpage import MAKE_RUN, PAGE, PAGE_CHECKOUT, TUTORIAL, normalised, shown, steps


def test_every_command_block_but_the_first_shows_what_it_prints() -> None:
    found = steps(PAGE, TUTORIAL)
    first, *rest = found
    assert [c.text.split()[0] for c in first.commands] == ["export"]
    assert all(s.output is not None and len(s.commands) == 1 for s in rest)
    assert [s.exit for s in found].count(1) == 1  # the refused scale
    assert "Ctrl-C stops everything." in shown(PAGE, MAKE_RUN).text


def test_normalising_keeps_what_the_product_says_and_drops_what_a_run_makes_anew() -> None:
    printed = (
        "pod/fedora-x86-4x2wz   0/1     Pending   0          87s\n"
        "  steps     remove 2 (fedora-x86-h6v7r) at 2026-12-01T19:15:07Z: cooldown 10m\n"
        "  curl http://127.0.0.1:34281/readyz\n"
        "logs in /tmp/x/checkout/.run\n\n"
    )
    shown_on_page = (
        "pod/fedora-x86-c9c6t 0/1 Pending 0 1s\n"
        "  steps remove 2 (fedora-x86-gxblq) at 2030-01-01T00:00:00Z: cooldown 10m\n"
        "  curl http://127.0.0.1:41327/readyz\n"
        f"logs in {PAGE_CHECKOUT}/.run\n"
    )
    assert normalised(printed, ["/tmp/x/checkout"]) == normalised(shown_on_page)
    assert normalised("Pending 2") != normalised("Pending 3")
    assert normalised("fedora-x86 created") == ["fedora-x86 created"]
