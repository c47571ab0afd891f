"""`docs/multichip.md` is what `tools/gen_multichip.py` makes of the
checked-in exports now: a change that moves a family's collectives, bytes
or verdict fails here until the page is written again."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge_opt.tools import gen_multichip

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_multichip_page_is_current(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the generator reads the exports and the page from the repository's root
    status = gen_multichip.main(["--check"])
    assert status == 0, capsys.readouterr().out


def test_every_export_the_page_names_is_checked_in():
    for entry in gen_multichip.ENTRIES:
        assert (ROOT / gen_multichip.MODELS / f"{entry.file}.onnx").exists(), entry.file
