"""Generate docs/dialects/*.md, docs/passes.md and docs/forge_rules.md from
the registered dialects, passes and Forge rules, so the reference cannot
drift from the code.

    python -m forge_opt.tools.gen_docs            # rewrite the pages
    python -m forge_opt.tools.gen_docs --check    # exit 1 if one is stale
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

DOCS = Path("docs")


def _doc(obj) -> str:
    text = inspect.getdoc(obj) or ""
    return " ".join(text.split())


def _irdl_row(op) -> str:
    d = op.get_irdl_definition()
    operands = ", ".join(name for name, _ in d.operands) or "-"
    results = ", ".join(name for name, _ in d.results) or "-"
    props = ", ".join(d.properties) or "-"
    return f"| `{op.name}` | {operands} | {results} | {props} | {_doc(op)} |"


def onnx_page() -> str:
    from forge_opt.dialects.onnx import CustomOp, YieldOp
    from forge_opt.dialects.onnx_ops import ONNX_OPS, ONNX_VERSION

    lines = [
        "# The `onnx` dialect",
        "",
        f"One op per operator of ONNX's default domain in its newest form (onnx {ONNX_VERSION}),",
        "generated from the schema registry (`dialects/onnx_ops.py`). Operand, result and attribute",
        "names are the schema's; optional operands may be absent, variadic ones take any number.",
        "",
        "Syntax: `%y = onnx.Clip(%x, none, %max) {attrs} : (types) -> types`; `none` marks an absent",
        "optional operand before a present one, attributes equal to the schema default are not printed,",
        "graph attributes follow as `name {region}` ending in `onnx.Yield`. The generic form works too.",
        "",
        f"- `{CustomOp.name}`: {_doc(CustomOp)}",
        f"- `{YieldOp.name}`: {_doc(YieldOp)}",
        "",
        "| op | opset | inputs | outputs | attributes |",
        "|---|---|---|---|---|",
    ]
    for op in ONNX_OPS:
        ins = ", ".join(n + ("?" if k == "optional" else "..." if k == "variadic" else "") for n, k in op.ONNX_INPUTS)
        outs = ", ".join(n + ("?" if k == "optional" else "..." if k == "variadic" else "") for n, k in op.ONNX_OUTPUTS)
        attrs = ", ".join(f"{n}: {k}" for n, k in op.ONNX_ATTRIBUTES.items())
        graphs = ", ".join(f"{g}: graph" for g in op.ONNX_GRAPHS)
        attributes = ", ".join(x for x in (attrs, graphs) if x)
        lines.append(f"| `{op.name}` | {op.ONNX_SINCE_VERSION} | {ins} | {outs} | {attributes} |")
    return "\n".join(lines) + "\n"


def tir_page() -> str:
    from forge_opt.dialects.tir import TIR
    from forge_opt.dialects.tir_functions import ATTRIBUTES, TABLES
    from forge_opt.transforms.tir_forge_calls import CALLS

    lines = [
        "# The `tir` dialect",
        "",
        "Framework-neutral tensor IR between `onnx` and `forge` (`dialects/tir.py`). Its ops may be",
        "richer than Forge's (several results, several axes); passes decompose them until each maps",
        "onto one Forge function. Every op has a numpy implementation (`interpreters/tir.py`).",
        "",
        "| op | operands | results | properties | meaning and verifier rules |",
        "|---|---|---|---|---|",
    ]
    lines += [_irdl_row(op) for op in sorted(TIR.operations, key=lambda o: o.name)]
    lines += [
        "",
        "## Function kinds",
        "",
        "`fn` of `tir.unary`, `tir.binary` and `tir.reduce`, and `kind` of `tir.pool2d`, are enum",
        "attributes printed bare (`tir.binary add %a, %b`). A kind's meaning comes from one table",
        "(`dialects/tir_functions.py`), which the interpreter reads too, and its Forge call from another",
        "(`transforms/tir_forge_calls.py`), which `tir-to-forge` reads.",
        "",
        "| attribute | kind | computes | Forge |",
        "|---|---|---|---|",
    ]
    for attr in ATTRIBUTES:
        calls = CALLS[attr.enum_type]
        for kind, fn in TABLES[attr.enum_type].items():
            lines.append(f"| `{attr.name}` | `{kind.value}` | {fn.doc} | {calls[kind]} |")
    return "\n".join(lines) + "\n"


def forge_page() -> str:
    from forge_opt.dialects.forge import OPS, ConstantOp, ParameterOp
    from forge_opt.dialects.forge_functions import REQUIRED

    lines = [
        "# The `forge` dialect",
        "",
        "One op per function of Forge's Python op API, each a class generated from its record",
        "(`dialects/forge_functions/`, which the Forge stand-in is built from too). Operands are the",
        "function's tensor parameters, properties its keyword arguments by Forge's names; a keyword",
        "left out takes Forge's default.",
        "",
        f"- `{ParameterOp.name}`: {_doc(ParameterOp)}",
        f"- `{ConstantOp.name}`: {_doc(ConstantOp)}",
        "",
        "| op | Forge call | keywords (default) |",
        "|---|---|---|",
    ]
    for op in sorted(OPS, key=lambda op: op.name):
        fn = op.FUNCTION
        params = ", ".join(
            "*" + p if k == "variadic" else p + ("=None" if k == "optional" else "") for p, k in fn.operands
        )
        kws = ", ".join(k if d is REQUIRED else f"{k}={d!r}" for k, d in fn.keywords)
        lines.append(f"| `{op.name}` | `forge.op.{fn.name}(name, {params})` | {kws or '-'} |")
    return "\n".join(lines) + "\n"


def forge_rules_page() -> str:
    from forge_opt.dialects.forge_functions import FUNCTIONS, RULES

    lines = [
        "# Forge's rules, as forge-opt enforces them",
        "",
        "Each check that real Forge makes of a `forge.op` call (its Python wrapper's asserts, its C++",
        "op's `TT_ASSERT`s, which run in release builds), read from tt-forge-fe at commit c6f95fba.",
        "Each is written once, beside the functions it checks (`dialects/forge_functions/`, a file a",
        "family, as Forge keeps an op's checks, shape and golden together), and named by their records:",
        "the `forge` dialect's verifier and the Forge stand-in both run them, so IR that verifies is IR",
        "Forge accepts, and an emitted module that runs on the stand-in runs on Forge. Errors start",
        "with the rule's id.",
        "",
        "Element types follow Forge's golden (each record's `dtype`): a comparison keeps its first",
        "operand's type, Divide is true division (float32 for integers), Cast to bool, int64, int8 or",
        "uint8 gives int32 (truncating), LogicalNot gives bool. The `forge` dialect's result types must",
        "say so, and `forge-check` compares output DataFormats as Forge's `verify` does (bool and int64",
        "are Int32).",
        "",
        "| rule | functions | what | source |",
        "|---|---|---|---|",
    ]
    for r in RULES:
        names = [f.name for f in FUNCTIONS if r in f.checks]
        functions = "every function" if len(names) == len(FUNCTIONS) else ", ".join(names)
        lines.append(f"| `{r.id}` | {functions} | {r.what} | `{r.source}` |")
    return "\n".join(lines) + "\n"


def passes_page() -> str:
    from forge_opt.transforms.pipelines import ALL_PASSES

    lines = [
        "# Passes",
        "",
        "Registered in `forge-opt` and, through the `xdsl.universe` entry point, in stock `xdsl-opt`.",
        "",
        "| pass | options | what it rewrites |",
        "|---|---|---|",
    ]
    import dataclasses

    for name, cls in ALL_PASSES.items():
        options = ", ".join(f"{f.name.replace('_', '-')}={f.default!r}" for f in dataclasses.fields(cls)) or "-"
        module_doc = " ".join((inspect.getdoc(sys.modules[cls.__module__]) or "").split())
        text = module_doc if module_doc.startswith(f"`{name}`") else _doc(cls)
        lines.append(f"| `{name}` | {options} | {text} |")
    return "\n".join(lines) + "\n"


PAGES = {
    "dialects/onnx.md": onnx_page,
    "dialects/tir.md": tir_page,
    "dialects/forge.md": forge_page,
    "passes.md": passes_page,
    "forge_rules.md": forge_rules_page,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the docs folder (default: docs)")
    args = parser.parse_args(argv)
    stale = []
    for rel, page in PAGES.items():
        path = args.docs / rel
        text = page()
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print("stale: " + ", ".join(stale) + " (run python -m forge_opt.tools.gen_docs)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
