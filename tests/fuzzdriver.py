"""Run many `workbench` command lines in one process (the fuzz test's subprocess): `python fuzzdriver.py CASES`.

CASES is a JSON list of {"id", "argv"}. Each case goes through `workbench.cli.main`, exactly what the
`workbench` entry point runs, with its stdout dropped and its stderr captured; an exception escaping main()
is printed as the traceback a user would see. One JSON line per case on stdout: {"id", "rc", "stderr"}.
Startup (imports of torch, transformers, datasets) is paid once per batch instead of once per case.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback


def main() -> None:
    from hallucination_workbench import main as workbench

    with open(sys.argv[1]) as f:
        cases = json.load(f)
    for case in cases:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                rc: int | str = workbench(case["argv"])
            except SystemExit as e:  # argparse refusals
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:
                traceback.print_exc()
                rc = 1
        print(json.dumps({"id": case["id"], "rc": rc, "stderr": err.getvalue()[-3000:]}), flush=True)


if __name__ == "__main__":
    main()
