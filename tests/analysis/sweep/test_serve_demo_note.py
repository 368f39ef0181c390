"""The demo's serving figures and the README's serving chart come from different performance models
(the demo's small sweep on the roofline, the README's what-if on the simulator) and can rank the
policies differently; each says which model made it."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from mpsim.analysis.sweep.serve_demo import SPEC, model_note
from mpsim.analysis.sweep.spec import parse_spec

README = Path(__file__).resolve().parents[3] / "README.md"


def _perf_model(name: str) -> str:
    spec = parse_spec(resources.files("mpsim.analysis").joinpath(name).read_text(encoding="utf-8"))
    assert spec.serve is not None
    return str(spec.serve.settings["perf_model"])


def test_the_demo_says_its_serving_is_the_roofline_and_the_readme_chart_the_simulators() -> None:
    assert _perf_model(SPEC) == "roofline" and _perf_model("specs/serve-whatif.yaml") == "sim"
    note = model_note("roofline")
    assert note.startswith("priced by the roofline") and "simulator" in note
    assert model_note("sim") == "priced by sim"
    paragraph = next(p for p in README.read_text(encoding="utf-8").split("\n\n") if "serve-capacity.png" in p)
    for says in ("priced by the simulator", "analysis/specs/serve-whatif.yaml",
                 "priced by the roofline", "analysis/specs/serve-demo.yaml"):
        assert says in paragraph.replace("\n", " "), says
