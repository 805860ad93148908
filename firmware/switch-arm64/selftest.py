"""Guest self-test: prove python3 + numpy + tflite-runtime run, and time inferences of the factory model.

Run by /init when the kernel command line has npc_mode=selftest. Prints one line
`NPC-SELFTEST {json}` on stdout and exits 0, or exits 1 with the error.
"""

import glob
import json
import os
import sys
import time


def main() -> int:
    t0 = time.monotonic()
    import numpy as np
    from tflite_runtime import __version__ as tfl_version
    from tflite_runtime.interpreter import Interpreter

    report = {
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "tflite_runtime": tfl_version,
        "import_s": round(time.monotonic() - t0, 3),
        "timing": os.environ.get("npc_timing", "?"),  # noqa: SIM112 (kernel args are lowercase)
    }
    models = sorted(glob.glob("/opt/npc/models/*.tflite"))
    if models:
        runs = int(os.environ.get("npc_runs", "200"))  # noqa: SIM112
        interp = Interpreter(model_path=models[0], num_threads=1)
        interp.allocate_tensors()
        inp = interp.get_input_details()[0]
        data = np.zeros(inp["shape"], dtype=inp["dtype"])
        times = []
        for i in range(runs + 10):
            interp.set_tensor(inp["index"], data)
            s = time.perf_counter_ns()
            interp.invoke()
            e = time.perf_counter_ns()
            if i >= 10:  # warm-up runs are not timed
                times.append((e - s) // 1000)
        times.sort()
        report.update(model=os.path.basename(models[0]), runs=runs, invoke_us=times)
    print("NPC-SELFTEST " + json.dumps(report, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
