"""Guest self-test: prove python3 + numpy + tflite-runtime run, and time inferences of the factory model.
With npc_fetch=coap://10.0.2.2:PORT/PATH on the kernel command line it also fetches that resource with
aiocoap (block-wise), the way model updates travel, and reports its size and sha256.

Run by /init when the kernel command line has npc_mode=selftest. Prints one line
`NPC-SELFTEST {json}` on stdout and exits 0, or exits 1 with the error.
"""

import asyncio
import glob
import hashlib
import json
import os
import sys
import time


async def fetch(url: str) -> dict:
    """GET `url` over CoAP (Block2 handled by aiocoap); size, sha256 and guest-clock time."""
    import aiocoap

    t0 = time.monotonic()
    ctx = await aiocoap.Context.create_client_context()
    try:
        response = await ctx.request(aiocoap.Message(code=aiocoap.GET, uri=url)).response
    finally:
        await ctx.shutdown()
    body = response.payload
    return {
        "code": str(response.code),
        "bytes": len(body),
        "sha256": hashlib.sha256(body).hexdigest(),
        "ms": round((time.monotonic() - t0) * 1000, 1),
    }


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
    url = os.environ.get("npc_fetch")  # noqa: SIM112
    if url:
        report["fetch"] = asyncio.run(fetch(url))
    print("NPC-SELFTEST " + json.dumps(report, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
