"""Export the vision families on Tenstorrent's multi-chip list as users
export them, tiny random configs: with Hugging Face Optimum where it
exports the family, with torch.onnx.export (TorchScript) where it does not.

- GLPN (monocular depth): task `depth-estimation`; a Mix Transformer
  encoder of 4 stages (1 block each; widths 16 to 128, 2 or 4 heads,
  attention over a sequence reduced by a strided convolution) and GLPN's
  decoder of convolutions and upsampling;
- SAM (segment anything): task `feature-extraction`, which Optimum writes
  as two models: the vision encoder (a ViT of 2 layers, width 32, 4 heads,
  windowed attention then global, decomposed relative positions, and its
  convolutional neck) on a 128x128 image, and the prompt encoder with the
  mask decoder (a two-way transformer of 2 layers, width 32, 4 heads);
- Fuyu (a decoder reading image patches, which Optimum does not export):
  torch.onnx.export of `FuyuForCausalLM` with its KV cache, 4 patches of
  4x4x3, its Persimmon decoder of 2 layers (width 32, 4 heads, QK-norm);
  the patches' embeddings replace the image placeholder tokens (id 5) by
  `masked_scatter`.

    python -m venv /tmp/exp && /tmp/exp/bin/pip install 'optimum-onnx==0.1.0' 'optimum==2.1.0' \\
        'transformers==4.57.6' 'tokenizers==0.22.2' 'torch==2.14.1' 'onnx==1.23.2'
    /tmp/exp/bin/python tests/data/models/make_vision_families.py [NAME ...]

Writes `fam_glpn.onnx` (input `pixel_values` [batch_size, num_channels,
height, width]; output `predicted_depth`), `fam_sam_vision.onnx` (input
`pixel_values` [batch_size, 3, 128, 128]; outputs `image_embeddings`,
`image_positional_embeddings`) and `fam_sam_decoder.onnx` (inputs
`input_points`, `input_labels`, `image_embeddings`,
`image_positional_embeddings`; outputs `iou_scores`, `pred_masks`) and
`fam_fuyu.onnx` (inputs `input_ids` [1, sequence_length], `image_patches`
[1, 4, 48], `attention_mask`, `position_ids`, `past_key_values.{i}.{key,value}`;
outputs `logits`, `present.{i}.{key,value}`).
"""

from __future__ import annotations

import sys

import torch  # pyright: ignore[reportMissingImports]  (optional: only to remake the models)
import transformers as t  # pyright: ignore[reportMissingImports]
from make_llm_families import HERE, export  # (run as a script: this folder is on the path)
from transformers.cache_utils import DynamicCache  # pyright: ignore[reportMissingImports]


def glpn():
    return t.GLPNForDepthEstimation(t.GLPNConfig(
        num_encoder_blocks=4, depths=[1, 1, 1, 1], sr_ratios=[8, 4, 2, 1], hidden_sizes=[16, 32, 64, 128],
        num_attention_heads=[2, 2, 4, 4], mlp_ratios=[2, 2, 2, 2], decoder_hidden_size=32))


def sam():
    vision = t.SamVisionConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, image_size=128,
                               patch_size=16, window_size=4, global_attn_indexes=[1], output_channels=32, mlp_dim=64,
                               num_pos_feats=16)
    prompt = t.SamPromptEncoderConfig(hidden_size=32, image_size=128, patch_size=16, mask_input_channels=8)
    decoder = t.SamMaskDecoderConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_dim=64,
                                     iou_head_hidden_dim=32)
    return t.SamModel(t.SamConfig(vision_config=vision.to_dict(), prompt_encoder_config=prompt.to_dict(),
                                  mask_decoder_config=decoder.to_dict()))


def fuyu():
    text = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=64)
    return t.FuyuForCausalLM(t.FuyuConfig(**text, patch_size=4, num_channels=3, image_size=16, image_token_id=5,
                                          text_config={"model_type": "persimmon", **text}))


class _WithPast(torch.nn.Module):
    """Fuyu's logits and its cache from its tokens, patches and cache, under
    Optimum's names (`past_key_values.{i}.{key,value}` in, `present.*` out):
    Optimum exports no Fuyu, so its decoders' interface is written here."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, image_patches, attention_mask, position_ids, *past):
        cache = DynamicCache()
        for i in range(len(past) // 2):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(input_ids=input_ids, image_patches=image_patches, attention_mask=attention_mask,
                         position_ids=position_ids, past_key_values=cache, use_cache=True)
        return (out.logits, *(x for layer in out.past_key_values.layers for x in (layer.keys, layer.values)))


def export_fuyu(model) -> None:
    layers, heads, head_dim, tokens, cached = 2, 4, 8, 8, 3
    ids = torch.randint(6, 128, (1, tokens))
    ids[0, 1:5] = 5  # the placeholders the 4 patches go to
    past = [torch.randn(1, heads, cached, head_dim) for _ in range(2 * layers)]
    pasts = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    presents = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    dynamic = {"input_ids": {1: "sequence_length"}, "position_ids": {1: "sequence_length"},
               "attention_mask": {1: "past_sequence_length + sequence_length"}, "logits": {1: "sequence_length"},
               **{n: {2: "past_sequence_length"} for n in pasts},
               **{n: {2: "past_sequence_length + sequence_length"} for n in presents}}
    feeds = (ids, torch.randn(1, 4, 48), torch.ones(1, cached + tokens, dtype=torch.int64),
             torch.arange(cached, cached + tokens).unsqueeze(0), *past)
    torch.onnx.export(_WithPast(model.eval()), feeds, HERE / "fam_fuyu.onnx", opset_version=17, dynamo=False,
                      input_names=["input_ids", "image_patches", "attention_mask", "position_ids", *pasts],
                      output_names=["logits", *presents], dynamic_axes=dynamic)
    print("wrote fam_fuyu.onnx")


MODELS = {  # name: the model, how it is exported
    "glpn": (glpn, lambda m: export(m, "depth-estimation", {"model.onnx": "fam_glpn.onnx"})),
    "sam": (sam, lambda m: export(m, "feature-extraction", {
        "vision_encoder.onnx": "fam_sam_vision.onnx", "prompt_encoder_mask_decoder.onnx": "fam_sam_decoder.onnx"})),
    "fuyu": (fuyu, export_fuyu),
}


def randomized(model):
    """Weights of a size that moves the outputs: SAM's initialisation leaves its
    weights near 1e-10 (its image embeddings near 1e-27), which any program
    would match. Norm scales near 1, the rest N(0, 0.2)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            norm_scale = p.ndim == 1 and "norm" in name and name.endswith("weight")
            p.copy_(1 + 0.1 * torch.randn_like(p) if norm_scale else 0.2 * torch.randn_like(p))
    return model


def main(names: list[str]) -> None:
    for name in names or MODELS:
        make, exported = MODELS[name]
        torch.manual_seed(0)
        exported(randomized(make()))


if __name__ == "__main__":
    main(sys.argv[1:])
