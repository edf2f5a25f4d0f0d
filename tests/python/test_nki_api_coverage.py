"""Tests for the NKI API table (torchneuron/nki/api_coverage.py): docs/nki.md holds what the tool
generates now, and the tool sees a name, a parameter or a member that goes missing."""
import os

import pytest

from torchneuron.nki import api_coverage, collectives, isa, language
from torchneuron.nki._api_manifest import MANIFEST
from torchneuron.nki._tensor import NKIError

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "nki.md")


def row(table, module, name):
    return next(r for r in table[module] if r[1] == name)


def test_docs_table_is_current():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    assert text.count(api_coverage.BEGIN) == 1 and text.count(api_coverage.END) == 1
    assert api_coverage.updated(text, api_coverage.markdown(api_coverage.coverage())) == text, (
        "docs/nki.md's NKI API table is stale: run python -m torchneuron.nki.api_coverage --write docs/nki.md")


def test_check_mode_exits_1_on_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "nki.md"
    stale.write_text("# NKI\n\nsome text\n")
    assert api_coverage.main(["--check", str(stale)]) == 1
    assert api_coverage.main(["--write", str(stale)]) == 0
    assert api_coverage.main(["--check", str(stale)]) == 0
    text = stale.read_text()
    assert text.startswith("# NKI\n\nsome text\n") and api_coverage.SECTION in text
    assert "supported" in capsys.readouterr().out


def test_manifest_names_are_unique_per_module():
    for module, entries in MANIFEST.items():
        names = [name for _, name, _, _ in entries]
        assert len(names) == len(set(names)), module
    assert sum(map(len, MANIFEST.values())) > 190


def test_a_name_we_lack_is_missing(monkeypatch):
    assert row(api_coverage.coverage(), "nki.isa", "nc_transpose")[2] == "supported"
    before = api_coverage.totals(api_coverage.coverage())
    monkeypatch.delattr(isa, "nc_transpose")
    table = api_coverage.coverage()
    assert row(table, "nki.isa", "nc_transpose")[2] == "missing"
    after = api_coverage.totals(table)
    assert after["missing"] == before["missing"] + 1 and after["supported"] == before["supported"] - 1


def test_a_documented_parameter_we_lack_is_partial(monkeypatch):
    def copy(x):  # nl.copy without dtype
        return x
    monkeypatch.setattr(language, "copy", copy)
    _, _, status, notes = row(api_coverage.coverage(), "nki.language", "copy")
    assert status == "partial" and "refuses `dtype`" in notes

    def copy_kw(x, **_unused):  # dtype taken and dropped
        return x
    monkeypatch.setattr(language, "copy", copy_kw)
    assert "ignores `dtype`" in row(api_coverage.coverage(), "nki.language", "copy")[3]


def test_an_isa_parameter_our_code_never_reads_is_partial(monkeypatch):
    def tensor_copy(*args, **kwargs):  # binds itself, reads only "src"
        return kwargs["src"]
    monkeypatch.setattr(isa, "tensor_copy", tensor_copy)
    _, _, status, notes = row(api_coverage.coverage(), "nki.isa", "tensor_copy")
    assert status == "partial" and "ignores `dst`" in notes and "engine" not in notes  # engine is a hint


def test_a_placeholder_that_only_raises_is_missing(monkeypatch):
    def rank_id(name=None):  # a name kept so kernels import, that raises when called
        raise NKIError("nki.collectives.rank_id is not provided")
    monkeypatch.setattr(collectives, "rank_id", rank_id)
    _, _, status, notes = row(api_coverage.coverage(), "nki.collectives", "rank_id")
    assert status == "missing" and "raises" in notes


def test_an_enum_member_we_lack_is_partial(monkeypatch):
    from enum import Enum
    monkeypatch.setattr(isa, "oob_mode", Enum("oob_mode", {"error": 0}))
    _, _, status, notes = row(api_coverage.coverage(), "nki.isa", "oob_mode")
    assert status == "partial" and "`skip`" in notes


@pytest.mark.parametrize("module", sorted(MANIFEST))
def test_every_module_resolves_to_ours(module):
    assert api_coverage.modules()[module].__name__.startswith("torchneuron.nki")


def test_nc_version_is_ordered():
    # AWS's library kernels compare generations (mlp_cte: get_nc_version() >= nc_version.gen3)
    assert isa.get_nc_version() >= isa.nc_version.gen3 > isa.nc_version.gen2
    assert sorted([isa.nc_version.gen4, isa.nc_version.gen2]) == [isa.nc_version.gen2, isa.nc_version.gen4]
