#!/usr/bin/python3
"""The planner's parameter count of config.json equals PyTorch's count of the model model.py builds from it.

The planner binary is $GPUGEEK_BINARY (CTest sets it) or build/gpugeek at the repository root; without
either the test is skipped when run by hand, and fails under CTest (which always sets the variable).
"""

import json
import os
import subprocess
import unittest

import harness  # first: puts examples/gpt on sys.path
from model import build_model, count_parameters

CONFIG = os.path.join(harness.GPT_DIR, "config.json")
REPO = os.path.dirname(os.path.dirname(harness.GPT_DIR))


class ParamCountTest(unittest.TestCase):
    def test_planner_equals_pytorch(self):
        binary = os.environ.get("GPUGEEK_BINARY") or os.path.join(REPO, "build", "gpugeek")
        if "GPUGEEK_BINARY" not in os.environ and not os.path.exists(binary):
            self.skipTest(f"no planner binary at {binary}; build it or set GPUGEEK_BINARY")
        r = subprocess.run([binary, "plan", CONFIG, "--task", "pretrain", "--seq", "256", "--json"], capture_output=True,
                           text=True, timeout=60, check=True)
        planned = json.loads(r.stdout)["model"]
        torch_count = count_parameters(build_model(CONFIG, seed=0))
        self.assertEqual(planned["model_type"], "gpt2")
        self.assertEqual(planned["parameters"], torch_count)
        self.assertEqual(torch_count, 3_290_624)  # the figure examples/gpt/README.md states


if __name__ == "__main__":
    unittest.main()
