"""nano-vllm's example.py and bench.py, unchanged (nano_vllm/), run on the installed package.
Both load ~/huggingface/Qwen3-0.6B/; a temporary HOME points it at a tiny checkpoint."""
import os
import re
import subprocess
import sys

from conftest import TIED
from bench_checkpoint import make_bench_checkpoint

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nano_vllm")


def run_script(name, model_dir, home, timeout):
    os.makedirs(os.path.join(home, "huggingface"))
    os.symlink(os.path.abspath(model_dir), os.path.join(home, "huggingface", "Qwen3-0.6B"))
    env = dict(os.environ, HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return subprocess.run([sys.executable, os.path.join(SCRIPTS, name)], cwd=home, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_example_py_runs_unchanged(tmp_path):
    proc = run_script("example.py", TIED, tmp_path / "home", timeout=600)
    assert proc.returncode == 0, proc.stderr
    prompts = re.findall(r"^Prompt: (.*)$", proc.stdout, re.M)
    completions = re.findall(r"^Completion: (.*)$", proc.stdout, re.M)
    assert len(prompts) == len(completions) == 2
    assert "introduce yourself" in prompts[0] and "<|im_start|>assistant" in prompts[0]
    assert all(len(c) > 2 for c in completions)  # a non-empty repr
    assert "Generating: 2/2" in proc.stderr  # the progress line


def test_bench_py_runs_unchanged(tmp_path):
    model = make_bench_checkpoint(TIED, tmp_path / "qwen3-bench", base_vocab=10240)
    proc = run_script("bench.py", model, tmp_path / "home", timeout=1200)
    assert proc.returncode == 0, proc.stderr
    # bench.py's own line; its total is the workload's (Python's random.seed(0) stream).
    match = re.search(r"^Total: (\d+)tok, Time: ([\d.]+)s, Throughput: ([\d.]+)tok/s$",
                      proc.stdout, re.M)
    assert match, proc.stdout
    assert int(match.group(1)) == 133966
    print(f"bench.py: {match.group(0)}")
