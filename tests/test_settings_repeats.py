"""Settings that were quietly reinterpreted: an ensemble.grid_step that does not divide 1 (weight_grid rounds 1/step,
so 0.3 searched steps of 1/3 and 0.7 only the members alone), and very long bad values echoed whole."""
from __future__ import annotations

import pytest

from pipeline.config import compose
from pipeline.settings_types import SettingsError


@pytest.mark.parametrize("step", [0.3, 0.7, 0.15])
def test_a_grid_step_that_does_not_divide_one_is_refused(step):
    with pytest.raises(SettingsError, match=r"ensemble.grid_step=.*: expected 1/n for a whole number n"):
        compose([f"ensemble.grid_step={step}"], with_selection=False)


@pytest.mark.parametrize("step", [1, 0.5, 0.25, 0.125, 0.1, 0.05, 0.01])
def test_a_grid_step_of_whole_ticks_loads(step):
    compose([f"ensemble.grid_step={step}"], with_selection=False)


@pytest.mark.parametrize("override", ["gnn.hidden=" + "x" * 5000, "gnn." + "x" * 5000 + "=1",
                                      "submit.name=a/" + "x" * 5000])
def test_a_very_long_bad_value_or_key_gives_a_short_line(override):
    """The line echoed the whole value (5 KB; 12 KB for an unknown key, with every key of the schema)."""
    with pytest.raises(SettingsError) as error:
        compose([override], with_selection=False)
    assert len(str(error.value)) < 1200 and "\n" not in str(error.value)
