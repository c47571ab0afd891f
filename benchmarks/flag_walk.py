"""The walk of a flag through the code, here and at a baseline commit:
one `forge-check` CLI run traced, counting the functions it runs whose code
names the flag's option as an identifier (a variable, attribute or keyword
spelled exactly `devices`, or the flag `--devices` itself; message text
aside) and the lines that do, and the distinct lines it runs in the
orchestration layers (check, split, plan, targets, execution, tools and
flags.py). Shorter is fewer places a flag is re-spelled on its way.

    python benchmarks/flag_walk.py [--baseline COMMIT]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
MODELS = CHECKOUT / "tests" / "data" / "models"
#: each flag's run: a tiny CNN through the split path, GPT-2 on 2 devices
RUNS = {
    "fallback": [str(MODELS / "tiny_cnn_opset17.onnx"), "--fallback"],
    "devices": [str(MODELS / "llm_gpt2.onnx"), "--devices", "2", "--dim", "batch_size=1", "--dim",
                "sequence_length=4", "--dim", "past_sequence_length=3"],
}
LAYERS = ("check", "split", "plan", "targets", "execution", "tools", "flags.py")

#: run in a child whose `forge_opt` is the checkout given: prints one JSON line
_TRACER = r'''
import contextlib, dis, io, json, os, sys
link, word, argv = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
sys.path.insert(0, os.path.dirname(link))  # `link` is named forge_opt
root = os.path.realpath(link)
from forge_opt.tools.forge_check import main
codes, lines, where = {}, set(), {}
def place(code):
    if code.co_filename not in where:
        path = os.path.realpath(code.co_filename)
        mine = path.startswith(root + os.sep) and "/.venv/" not in path
        where[code.co_filename] = os.path.relpath(path, root) if mine else ""
    return where[code.co_filename]
def tracer(frame, event, arg):
    rel = place(frame.f_code)
    if not rel or not frame.f_code.co_flags & 0x1:  # a function's body, not a module's or a class's
        return None
    codes[(rel, frame.f_code.co_qualname)] = frame.f_code
    if rel.split(os.sep)[0] not in LAYERS:
        return None
    def local(frame, event, arg):
        if event == "line":
            lines.add((rel, frame.f_lineno))
        return local
    return local
LAYERS = json.loads(sys.argv[4])
sys.settrace(tracer)
try:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(argv)
except SystemExit as e:
    status = e.code
sys.settrace(None)
def names(v):
    return any(names(x) for x in v) if isinstance(v, tuple) else v in (word, "--" + word)
naming = {}
for key, code in codes.items():
    found = {i.positions.lineno for i in dis.get_instructions(code) if i.positions and names(i.argval)}
    if found:
        naming["%s %s" % key] = len(found)
print(json.dumps({"status": status, "functions": len(naming), "lines": sum(naming.values()),
                  "walked": len(lines), "naming": naming}))
'''


def walk(package: Path, flag: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _TRACER, str(package), flag, json.dumps(RUNS[flag]),
                           json.dumps(LAYERS)], capture_output=True, text=True, check=True)
    found = json.loads(done.stdout.splitlines()[-1])
    if found["status"] != 0:
        raise SystemExit(f"forge-check {' '.join(RUNS[flag])} ended {found['status']} in {package}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--baseline", default="6b0eda7", help="the commit to compare with (default 6b0eda7, "
                        "before the house's round 4)")
    parser.add_argument("--list", action="store_true", help="also list the functions naming each flag")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "here").mkdir()
        here = Path(tmp) / "here" / "forge_opt"
        here.symlink_to(CHECKOUT)  # the checkout's folder, imported by its package's name
        base = Path(tmp) / "forge_opt"
        base.mkdir()
        archive = subprocess.run(["git", "-C", str(CHECKOUT), "archive", args.baseline], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        print(f"{'flag':<12} {'':<10} {'functions naming it':>20} {'lines naming it':>16} {'lines walked':>13}")
        for flag in RUNS:
            now, then = walk(here, flag), walk(base, flag)
            for label, w in ((args.baseline, then), ("this", now)):
                print(f"--{flag:<10} {label:<10} {w['functions']:>20} {w['lines']:>16} {w['walked']:>13}")
            if args.list:
                for name in sorted(set(now["naming"]) | set(then["naming"])):
                    print(f"    {then['naming'].get(name, '-'):>3} {now['naming'].get(name, '-'):>3}  {name}")


if __name__ == "__main__":
    main()
