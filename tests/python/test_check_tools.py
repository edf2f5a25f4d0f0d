"""python -m torchneuron.check on scripts of ours (clean, a CPU fallback, a per-step .item(), one
written for CUDA, one compiled with a graph break) and python -m torchneuron.info."""
import json
import os
import sys

import pytest

from conftest import run_in_new_group

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "check_scripts")


def check(tmp_path, script, *options):
    """Runs the check tool; returns its JSON report and its printed output."""
    prefix = str(tmp_path / "report")
    path = script if os.path.isabs(script) else os.path.join(SCRIPTS, script)
    done = run_in_new_group([sys.executable, "-m", "torchneuron.check", "--output", prefix, *options, path], 300,
                            capture_output=True, text=True, cwd=str(tmp_path),
                          env={k: v for k, v in os.environ.items() if not k.startswith("TORCHNEURON_")})
    assert done.returncode == 0, done.stderr[-3000:]
    with open(prefix + ".json") as f:
        report = json.load(f)
    with open(prefix + ".md") as f:
        assert report["verdict"] in f.read()
    return report, done.stdout


def test_clean_script(tmp_path):
    report, printed = check(tmp_path, "clean.py")
    neuron = report["neuron"]
    assert neuron["error"] is None and neuron["fallbacks"] == []
    assert len(neuron["step_seconds"]) == 6 and len(report["cpu"]["step_seconds"]) == 6
    # The one .item() after the loop is not a per-step sync.
    assert [s["count"] for s in neuron["syncs"]] == [1] and neuron["syncs"][0]["site"].endswith("clean.py:14")
    assert neuron["peak_memory_bytes"] > 0
    assert report["verdict"].startswith("runs natively on neuron") and "the speed of CPU PyTorch" in report["verdict"]
    assert "verdict" in printed


def test_fallback_is_reported_with_its_line(tmp_path):
    report, _ = check(tmp_path, "fallback.py", "--no-cpu")
    fallbacks = {f["op"]: f for f in report["neuron"]["fallbacks"]}
    assert fallbacks["aten::multi_margin_loss"]["calls"] == 4
    assert fallbacks["aten::multi_margin_loss"]["first_call"].endswith("fallback.py:10")
    assert "aten::multi_margin_loss_backward" in fallbacks
    assert "fall back to the CPU" in report["verdict"] and "cpu" not in report


def test_per_step_item_is_a_sync_per_step(tmp_path):
    report, _ = check(tmp_path, "item_per_step.py", "--no-cpu")
    (sync,) = report["neuron"]["syncs"]
    assert sync["kind"] == ".item()" and sync["count"] == 5 and sync["site"].endswith("item_per_step.py:15")
    assert "1.0 host synchronization(s) per step" in report["verdict"]


def test_script_written_for_cuda_runs_with_a_device_map(tmp_path):
    report, _ = check(tmp_path, "written_for_cuda.py", "--device-map", "cuda=neuron")
    assert report["neuron"]["error"] is None and len(report["neuron"]["step_seconds"]) == 3
    assert report["cpu"]["error"] is None
    assert report["neuron"]["peak_memory_bytes"] > 0  # it really ran on neuron


def test_without_a_device_map_a_cuda_script_fails_clearly(tmp_path):
    report, _ = check(tmp_path, "written_for_cuda.py", "--no-cpu")
    assert report["verdict"].startswith("does not run on neuron")


def test_compile_reports_graph_breaks_and_recompiles(tmp_path):
    script = tmp_path / "compiled.py"
    script.write_text(
        "import torch\n"
        "model = torch.nn.Linear(8, 8).to('neuron')\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "@torch.compile\n"
        "def loss_of(x):\n"
        "    y = model(x)\n"
        "    print('a graph break')\n"
        "    return y.relu().sum()\n"
        "for i in range(3):\n"
        "    loss_of(torch.randn(4 + i, 8, device='neuron')).backward()\n"
        "    opt.step()\n")
    report, _ = check(tmp_path, str(script), "--compile", "--no-cpu")
    compiled = report["neuron"]["compile"]
    assert compiled["graphs"] >= 2
    assert any(f"{script}:7" in " ".join(b) for b in compiled["graph_breaks"])
    assert compiled["recompiles"]  # a new batch size
    assert "graph break" in report["verdict"]


def test_info_reports_the_installation(run_python):
    result = run_python("import torchneuron.info as i; i.main(['--json'])", env={"TORCHNEURON_FALLBACK": "silent"})
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["torch"].startswith("2.13") and len(info["devices"]) == 2
    assert info["cpu level running"] in info["cpu levels built"]
    assert info["environment"]["TORCHNEURON_FALLBACK"] == "silent"
    assert info["native ops"] > 500 and info["distributed backend registered"] is True
    text = run_in_new_group([sys.executable, "-m", "torchneuron.info"], 120, capture_output=True, text=True)
    assert "neuron:0: 8.0 GiB" in text.stdout and "compile cache:" in text.stdout


@pytest.mark.parametrize("bad", ["cuda", "cuda=neuron,oops"])
def test_bad_device_map_is_refused(tmp_path, bad):
    done = run_in_new_group([sys.executable, "-m", "torchneuron.check", "--device-map", bad,
                             os.path.join(SCRIPTS, "clean.py")], 120, capture_output=True, text=True)
    assert done.returncode != 0 and "--device-map takes from=to pairs" in done.stderr


def test_graph_capture_assessment(tmp_path):
    clean, _ = check(tmp_path, "clean.py", "--no-cpu")  # AdamW without capturable=True
    assert clean["neuron"]["graph_capture"] == [
        "AdamW runs with capturable=False: its step reads the step count on the host; pass capturable=True"]
    per_step, printed = check(tmp_path, "item_per_step.py", "--no-cpu")  # SGD, but an .item() each step
    (blocker,) = per_step["neuron"]["graph_capture"]
    assert blocker.startswith("host synchronization .item() at") and blocker.endswith("item_per_step.py:15")
    assert "graph capture a step cannot be captured" in " ".join(printed.split())
    script = tmp_path / "capturable.py"
    script.write_text((open(os.path.join(SCRIPTS, "clean.py")).read()
                       .replace("lr=1e-3)", "lr=1e-3, capturable=True)")))
    capturable, _ = check(tmp_path, str(script), "--no-cpu")
    assert capturable["neuron"]["graph_capture"] == []
    with open(str(tmp_path / "report") + ".md") as f:
        assert "a step could be captured as a graph" in f.read()
