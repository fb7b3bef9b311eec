"""The one progress bar (tileblas._progress.Progress): text fallback, tqdm, log lines, disabled."""

from __future__ import annotations

import builtins

import pytest

from tileblas._progress import Progress


@pytest.fixture
def no_tqdm(monkeypatch):
    real = builtins.__import__

    def imp(name, *a, **k):
        if name == "tqdm":
            raise ImportError("no tqdm here")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", imp)


def test_text_bar_counts_and_estimates(no_tqdm, capsys):
    logged = []
    bar = Progress(4, True, "work", "pt", log=logged.append)
    bar.step("first")
    bar.step("second", k=2)
    bar.write("a line")
    bar.close()
    err = capsys.readouterr().err
    assert "work [" in err and "1/4" in err and "3/4" in err and "eta" in err and "second" in err
    assert logged == ["a line"] and bar.done == 3


def test_counter_when_the_total_is_unknown(no_tqdm, capsys):
    with Progress(None, True, "sampling", "pt") as bar:
        for _ in range(5):
            bar.step()
    assert "sampling: 5 pts" in capsys.readouterr().err


def test_disabled_shows_nothing_but_still_logs(capsys):
    logged = []
    bar = Progress(3, False, "quiet", log=logged.append)
    bar.step("x")
    bar.write("kept")
    bar.close()
    assert capsys.readouterr().err == "" and logged == ["kept"] and bar.done == 1


def test_tqdm_bar_when_installed(capsys):
    pytest.importorskip("tqdm")
    bar = Progress(2, True, "grid", "pt")
    bar.step("dgemm 64")
    bar.step("dgemm 128")
    bar.write("between")
    bar.close()
    out = capsys.readouterr()
    assert "between" in out.out and "2/2" in out.err and "grid" in out.err
