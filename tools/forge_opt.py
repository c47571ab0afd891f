"""`forge-opt`: xdsl-opt with forge-opt's dialects, passes, targets and the
ONNX frontends (`.onnx`, `.onnxtxt`)."""

from __future__ import annotations

import argparse
import gc
import io
import os
import sys
import traceback
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import Builtin, ModuleOp, StringAttr
from xdsl.dialects.func import Func
from xdsl.utils.exceptions import ArgSpecParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from forge_opt.diagnostics import ForgeOptError
from forge_opt.universe import DIALECTS, PASSES, TARGETS, shard_dialect


class ForgeOptMain(xDSLOptMain):
    version_format = "forge-opt {forge_version} (xdsl {{xdsl_version}})".format(
        forge_version=__import__("forge_opt").__version__
    )

    def register_all_dialects(self) -> None:
        self.ctx.register_dialect("builtin", lambda: Builtin)
        self.ctx.register_dialect("func", lambda: Func)
        for name, factory in DIALECTS.items():
            self.ctx.register_dialect(name, factory)
        self.ctx.register_dialect("shard", shard_dialect)

    def register_all_passes(self) -> None:
        from xdsl.transforms.canonicalize import CanonicalizePass
        from xdsl.transforms.common_subexpression_elimination import (
            CommonSubexpressionElimination,
        )
        from xdsl.transforms.dead_code_elimination import DeadCodeElimination

        for p in (CanonicalizePass, CommonSubexpressionElimination, DeadCodeElimination):
            self.register_pass(p.name, lambda p=p: p)
        for name, factory in PASSES.items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        from forge_opt.targets.mlir import ForgeMLIRTarget

        self.available_targets["mlir"] = lambda: ForgeMLIRTarget
        for name, factory in TARGETS.items():
            self.available_targets[name] = factory

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        from forge_opt.frontends import onnx as importer

        def from_binary(io: IO[bytes]) -> ModuleOp:
            from pathlib import Path

            if self.args.input_file and not self.args.split_input_file:
                # read the weights straight from the file, once
                model, base, weights = importer.load_model_lazily(Path(self.args.input_file))
                return importer.import_model(model, base, weights, self._shapes())
            model = importer.parse_bytes(io.read(), self.get_input_name())
            return importer.import_model(model, self._model_folder(), shapes=self._shapes())

        def from_text(io: IO[bytes]) -> ModuleOp:
            model = importer.parse_text(io.read().decode(), self.get_input_name())
            return importer.import_model(model, self._model_folder(), shapes=self._shapes())

        self.available_frontends["onnx"] = from_binary
        self.available_frontends["onnxtxt"] = from_text

    def _shapes(self):
        from forge_opt.frontends.onnx.shapes import InputShapes

        return InputShapes.parse(self.args.shape, self.args.dim)

    def _model_folder(self):
        from pathlib import Path

        name = self.args.input_file
        return Path(name).resolve().parent if name else Path.cwd()

    def _output_folder(self) -> str | None:
        """`-o DIR/` (or an existing folder) with forge-python: the folder a
        tensor-parallel program is written into."""
        out = self.args.output_file
        if out and (out.endswith(os.sep) or os.path.isdir(out)):
            return out
        return None

    def prepare_output(self) -> IO[str]:
        if self._output_folder() is not None:
            return sys.stdout  # the files go into the folder; the report to the terminal
        if self.args.output_file is None:
            return sys.stdout
        # the output replaces the file only once the whole run succeeded (`run`): a failed compile leaves it
        from forge_opt.frontends.onnx.weights import overwritten_input

        if self.args.input_file and (read := overwritten_input(self.args.output_file, self.args.input_file)):
            raise ForgeOptError(f"-o {self.args.output_file}: is {read}, which forge-opt reads; name another file")
        folder = os.path.dirname(os.path.abspath(self.args.output_file))
        if not os.path.isdir(folder):
            raise ForgeOptError(f"{self.args.output_file}: the folder {folder} does not exist")
        self._pending = _PendingOutput()
        return self._pending

    def run(self):
        if self.args.check_sharding:
            raise SystemExit(_check_sharding(self.args.input_file))
        self._pending = None
        self._target_for_output()
        super().run()
        if self._pending is not None:
            from forge_opt.files import write_text

            write_text(self.args.output_file, self._pending.getvalue())

    def apply_passes(self, prog: ModuleOp) -> None:
        from forge_opt.transforms.tp.sizing import SIZING_ATTR

        super().apply_passes(prog)
        sizing = prog.attributes.get(SIZING_ATTR)
        if isinstance(sizing, StringAttr):  # device-memory=BYTES: the device count chosen, and why
            print(sizing.data, file=sys.stderr)

    def _target_for_output(self) -> None:
        """`-o` as the target's options: forge-python writes a program for
        several devices into `-o DIR/`, and a module's constants beside
        `-o FILE` (named for it); another target writes no folder."""
        from xdsl.utils.arg_spec import ArgSpec, parse_spec

        spec = parse_spec(self.args.target)
        folder, out = self._output_folder(), self.args.output_file
        if spec.name != "forge-python":
            if folder is not None:
                raise ForgeOptError(f"{folder}: is a folder; -o names a file unless the program is for several "
                                    "devices (-t forge-python)")
            return
        given: dict = {"folder": (folder,)} if folder is not None else {
            "constants-dir": (os.path.dirname(os.path.abspath(out)) if out else os.getcwd(),),
            "stem": (os.path.splitext(os.path.basename(out))[0] if out else "",)}
        self.args.target = str(ArgSpec(spec.name, {**spec.parameters, **given}))

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--dim",
            metavar="SYMBOL=N",
            action="append",
            default=[],
            help="size of every input dimension named SYMBOL in an ONNX model, e.g. --dim batch=1 (repeatable)",
        )
        arg_parser.add_argument(
            "--shape",
            metavar="NAME=D0,D1,...",
            action="append",
            default=[],
            help="the whole shape of the ONNX model's input NAME, e.g. --shape input_ids=1,128 (repeatable)",
        )
        arg_parser.add_argument(
            "--check-sharding",
            action="store_true",
            help="check the ONNX model's sharding annotations (IR 11: configurations, per-node sharding specs, "
            "pipeline stages) against ONNX's formalism, and exit: 0 valid, 1 a problem (each named)",
        )
        arg_parser.add_argument(
            "--debug",
            default=False,
            action="store_true",
            help="show the Python traceback of an error (for forge-opt developers)",
        )


class _PendingOutput(io.StringIO):
    """forge-opt's output to a file, kept until the run ends: xdsl-opt closes
    its output stream even when a pass fails."""

    def close(self) -> None:
        pass


def _check_sharding(path: str | None) -> int:
    """`--check-sharding MODEL`: a summary of the annotations and 0, or each
    problem on standard error and 1."""
    from forge_opt.frontends.onnx import load_model
    from forge_opt.frontends.onnx.sharding import check_sharding

    if not path:
        raise ForgeOptError("--check-sharding reads an ONNX model: give its file")
    model, _ = load_model(path)
    problems = check_sharding(model)
    for problem in problems:
        print(f"forge-opt: error: {problem}", file=sys.stderr)
    if problems:
        return 1
    configurations = [f"{c.name}: {c.num_devices} devices" if not n else f"{c.name}: {c.num_devices}"
                      for n, c in enumerate(model.configuration)]
    annotated = sum(1 for node in model.graph.node if node.device_configurations)
    count = len(configurations)
    print(f"{path}: {count} configuration{'' if count == 1 else 's'} ({', '.join(configurations) or 'none'}); "
          f"{annotated} node{'' if annotated == 1 else 's'} annotated: valid")
    return 0


def _message(e: BaseException) -> str:
    text = str(e).strip()
    if isinstance(e, ForgeOptError):
        return text
    if isinstance(e, IsADirectoryError):
        return f"{e.filename}: is a folder, not a model file (.onnx, .onnxtxt or .mlir)"
    if isinstance(e, FileNotFoundError):
        folder = os.path.dirname(e.filename or "")
        if folder and not os.path.isdir(folder):
            return f"{e.filename}: the folder {folder} does not exist"
        return f"{e.filename}: no such file"
    if isinstance(e, OSError) and e.strerror:  # a folder that cannot be written, a full disk
        return f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    if isinstance(e, ArgSpecParseError):
        return (f"{text}\na pass option's value holding '/' or '.' is a string: quote it, as in "
                "-p 'onnx-to-forge{devices=2 plan=\"plan.json\"}'")
    # xDSL reports bad flags, pass names and pass options as ValueError.
    if type(e).__name__ in ("ParseError", "VerifyException", "DiagnosticException", "ValueError"):
        return text
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def run(args: Sequence[str] | None = None, prog: str = "forge-opt") -> int:
    argv = list(sys.argv[1:] if args is None else args)
    debug = "--debug" in argv or os.environ.get("FORGE_OPT_DEBUG") == "1"
    # The IR is one large graph of reference cycles that lives to the end of
    # the run, so the cyclic collector's full passes find little garbage: on
    # a 100k-node graph they cost 30% of the run for 12% less peak memory.
    collecting = gc.isenabled()
    gc.disable()
    try:
        ForgeOptMain(description="forge-opt: ONNX to Tenstorrent Forge compiler driver", args=argv).run()
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    except KeyboardInterrupt:
        return 130
    except (Exception, ArgSpecParseError) as e:  # xDSL's pass-spec errors are BaseExceptions
        if debug:
            traceback.print_exc()
        message = _message(e)
        if "\n" in message:
            print(f"{prog}: error:\n{message}", file=sys.stderr)
        else:
            print(f"{prog}: error: {message}", file=sys.stderr)
        return 1
    finally:
        if collecting:
            gc.enable()
    return 0


def main() -> None:
    # The process ends with the run, so it ends without tearing the IR down:
    # the interpreter's exit frees it object by object, through the cyclic
    # collector, which for 100k nodes takes 1.8 s (a tenth of the compile).
    gc.disable()
    code = run()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # stdout closed early (`forge-opt ... | head`)
        code = code or 1
    os._exit(code)


if __name__ == "__main__":
    main()
