"""Export the small PyTorch models under tests/data/models/ (random weights,
tiny configurations so each file stays well under 3 MB).

Needs torch and transformers, which forge-opt itself does not:

    pip install torch==2.13.0 transformers onnx
    python tests/data/models/make_models.py

Each architecture is exported with the TorchScript exporter at opsets 14
and 17; CI only reads the checked-in .onnx files. The `*_dynamic_*` files
are the same transformers exported as users usually do, with symbolic
`batch` and `sequence` dims (`dynamic_axes`); `splits_opset{13,18}` holds
`tensor_split`/`chunk`/`unbind` over a symbolic width, which the TorchScript
exporter writes as a Loop over SequenceInsert. `python make_models.py dynamic`
writes only those.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch  # pyright: ignore[reportMissingImports]  (optional: only to remake the models)
import transformers  # pyright: ignore[reportMissingImports]

HERE = Path(__file__).resolve().parent
OPSETS = (14, 17)


class TinyCnn(torch.nn.Module):
    """conv/bn/relu/pool/linear: a hand-written CNN."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, stride=2, padding=1),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
        )
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


class LogitsOnly(torch.nn.Module):
    """A transformers model returning only its first output tensor."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args):
        out = self.model(*args)
        return out[0] if isinstance(out, tuple) else next(iter(out.values()))


def lively(model: torch.nn.Module) -> torch.nn.Module:
    """He-initialised convolutions and non-trivial batch-norm statistics, so
    activations keep their scale through the network (the libraries' own
    initialisation shrinks a deep CNN's output to almost nothing, which
    would make a numerical check toothless)."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            fan_in = m.weight[0].numel()
            m.weight.data = torch.randn(m.weight.shape, generator=g) * (2.0 / fan_in) ** 0.5
        elif isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.weight.data = torch.rand(c, generator=g) + 0.5
            m.bias.data = torch.randn(c, generator=g) * 0.1
            m.running_mean = torch.randn(c, generator=g) * 0.1
            m.running_var = torch.rand(c, generator=g) + 0.5
    return model


def models():
    torch.manual_seed(0)
    tokens = torch.randint(0, 128, (1, 16))
    yield "tiny_cnn", lively(TinyCnn()), (torch.randn(1, 3, 16, 16),), ["x"]
    gpt2 = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=32)
    )
    yield "gpt2", LogitsOnly(gpt2), (tokens,), ["input_ids"]
    bert = transformers.BertModel(
        transformers.BertConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
            # more than 32 positions: the exported position-id GatherElements then
            # folds past onnx.reference's GatherElements bug (see interpreters/onnx.py)
            vocab_size=128, max_position_embeddings=64,
        )
    )
    yield "bert", LogitsOnly(bert), (tokens,), ["input_ids"]
    vit = transformers.ViTModel(
        transformers.ViTConfig(
            image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=128, num_channels=3,
        )
    )
    yield "vit", LogitsOnly(vit), (torch.randn(1, 3, 32, 32),), ["pixel_values"]
    resnet = transformers.ResNetModel(
        transformers.ResNetConfig(
            num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic"
        )
    )
    yield "resnet", LogitsOnly(lively(resnet)), (torch.randn(1, 3, 32, 32),), ["pixel_values"]
    mobilenet = transformers.MobileNetV2Model(
        transformers.MobileNetV2Config(num_channels=3, image_size=32, depth_multiplier=0.25)
    )
    yield "mobilenet_v2", LogitsOnly(lively(mobilenet)), (torch.randn(1, 3, 32, 32),), ["pixel_values"]


@torch.jit.script
def reversed_thirds(x: torch.Tensor) -> torch.Tensor:
    """A scripted loop over a list: exported as Loop over SequenceInsert."""
    out: list[torch.Tensor] = []
    for part in torch.tensor_split(x, 3, dim=2):
        out.insert(0, part * 2.0)
    return torch.cat(out, dim=2)


class Splits(torch.nn.Module):
    """Splits whose sizes the exporter computes from a symbolic dim."""

    def forward(self, x):
        a = torch.tensor_split(x, 3, dim=2)
        b = torch.chunk(x, 2, dim=2)
        c = torch.unbind(x, dim=0)
        return torch.cat(a[::-1], 2), b[0][..., :1] - b[1][..., :1], torch.stack(c[::-1]), reversed_thirds(x) + 1.0


def dynamic_models():
    """(name, model, args, input names, dynamic axes by input, opsets)."""
    by_name = {name: (model, args, names) for name, model, args, names in models()}
    tokens = {0: "batch", 1: "sequence"}
    for name, axes in (("gpt2", tokens), ("bert", tokens), ("vit", {0: "batch"})):
        model, args, names = by_name[name]
        yield f"{name}_dynamic", model, args, names, {names[0]: axes}, (17,)
    yield "splits", Splits(), (torch.randn(2, 4, 9),), ["x"], {"x": {2: "width"}}, (13, 18)


def main() -> None:
    if sys.argv[1:] == ["dynamic"]:
        for name, model, args, input_names, axes, opsets in dynamic_models():
            model.eval()
            for opset in opsets:
                path = HERE / f"{name}_opset{opset}.onnx"
                with torch.no_grad():
                    torch.onnx.export(
                        model, args, str(path), input_names=input_names, opset_version=opset,
                        dynamic_axes=axes, dynamo=False, do_constant_folding=False,
                    )
                print(f"{path.name}: {path.stat().st_size / 1e6:.2f} MB")
        return
    for name, model, args, input_names in models():
        model.eval()
        for opset in OPSETS:
            path = HERE / f"{name}_opset{opset}.onnx"
            with torch.no_grad():
                torch.onnx.export(
                    model, args, str(path), input_names=input_names, output_names=["output"],
                    opset_version=opset, dynamo=False, do_constant_folding=False,
                )
            print(f"{path.name}: {path.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
