"""The notebooks run top to bottom without errors, and show what they are about."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).parent.parent / "notebooks"
# notebook -> texts its outputs must hold; each also draws a plot
EXPECTED = {
    "quickstart.ipynb": ["correct!", "steps/s"],
    "trl_grpo.ipynb": ["mean env reward per step: [", "sessions left open: 0"],
    "trl_spec.ipynb": ["mean env reward per step: [", "sessions left open: 0"],
}


def test_every_notebook_is_checked():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.bench) if name == "trl_grpo.ipynb" else name
                                  for name in sorted(EXPECTED)])  # (trl_grpo trains longest: make bench runs it)
def test_notebook_runs(name):
    if name.startswith("trl_"):
        pytest.importorskip("trl")
    path = NOTEBOOKS / name
    notebook = nbformat.read(path, as_version=4)
    resources = {"metadata": {"path": str(path.parent)}}
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources=resources).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    for expected in EXPECTED[name]:
        assert expected in text
    assert any("image/png" in o.get("data", {}) for o in outputs)
