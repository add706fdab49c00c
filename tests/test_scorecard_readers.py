"""The scorecard's readers are found by registry: every kind of produced file has one reader, and
every SC-MoA analysis table one table reader, run in a fixed order."""

from __future__ import annotations

import pytest

from concord.registry import UnknownNameError
from concord.scorecard.readers import READERS, SCMOA_STEMS, SCMOA_TABLES, classify
from concord.scorecard.readers.scmoa import SCMOA_READ_ORDER

EXAMPLES = {
    "tables/table2.csv": ("core_table", {}),
    "figures/figure5a.json": ("core_figure5a", {}),
    "tables/figure3_steps_saved.csv": ("core_figure3", {}),
    "analysis/qwen/amc/recovery.json": ("core_recovery", {"model": "qwen", "bench": "amc"}),
    "fmv/tables/table2.csv": ("fmv_table", {"table": "2"}),
    "fmv/figures/lcb_v6/figure2_right.csv": ("fmv_figure2", {"bench": "lcb_v6"}),
    "scmoa/m/bbh3@mech/analysis/flips.csv": ("scmoa", {"model": "m", "bench": "bbh3@mech", "table": "flips"}),
    "scmoa/m/gpqa/analysis/summary.json": ("scmoa", {"model": "m", "bench": "gpqa", "table": "summary"}),
}


@pytest.mark.parametrize("rel", sorted(EXAMPLES))
def test_each_produced_file_is_classified_by_its_registered_pattern(rel):
    kind, fields = EXAMPLES[rel]
    found = classify(rel)
    assert found is not None and found[0] == kind
    assert {k: v for k, v in found[1].items() if k in fields} == fields


def test_every_kind_has_an_example_and_unknown_paths_are_not_read():
    assert set(READERS.names()) == {kind for kind, _ in EXAMPLES.values()}
    assert classify("scmoa/crossrun/x/analysis/summary.json") is None
    assert classify("tables/table1.md") is None
    with pytest.raises(UnknownNameError, match="Did you mean: 'core_table'"):
        READERS.get("core_tabel")


def test_every_scmoa_table_has_one_reader_in_the_read_order():
    assert set(SCMOA_READ_ORDER) == {*SCMOA_STEMS, "summary"} == set(SCMOA_TABLES.names())
    assert len(SCMOA_READ_ORDER) == len(set(SCMOA_READ_ORDER))
