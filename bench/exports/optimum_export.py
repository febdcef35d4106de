#!/usr/bin/env python3
"""Exports seeded random Hugging Face models with Optimum's ONNX exporter (the way most users get
a transformer's ONNX file), each with test data sets of onnxruntime's outputs, so that
bench/exports/check.sh compiles them and compares stitchc on emu against onnxruntime.

optimum-onnx pins transformers below 4.58, so it gets its own venv (which may borrow torch from
the venv of export.py through a .pth file instead of downloading it again):

    python3 -m venv optvenv && optvenv/bin/pip install torch "transformers==4.57.6" optimum-onnx \
        "diffusers==0.35.2" onnxruntime
    optvenv/bin/python bench/exports/optimum_export.py OUT [NAME ...]
    bash bench/exports/check.sh OUT [NAME ...]

Each export's ONNX files become directories of their own: NAME for model.onnx, NAME_encoder,
NAME_decoder, NAME_decoder_with_past and NAME_decoder_merged for an encoder-decoder's
encoder_model.onnx, ... (the merged decoder's If on use_cache_branch is compiled one branch per
data set: a file `constant_inputs` names the input, which check.sh passes as --constant-input). The data
sets bind batch and sequence as export.py's do (2 x 32, 1 x 7, 3 x 45); a model with past keys and
values runs a decoding step (one new token after 31, 6 and 44) and, for the first set, a prefill
with an empty past (past length 0), as Optimum's runtime calls it. A file `time_shapes` beside each
holds the flags bench/gpu/run_exports.sh times it at on a GPU (batch 8 x sequence 128; a decoding
step at batch 8 after 127 tokens; images at batch 32).

Tooling only: nothing in the compiler or the runtime imports Python.
"""
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

VOCAB = 1000
SMALL = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512)
SHAPES = [(2, 32), (1, 7), (3, 45)]
IMAGE = 64  # the vision models' image size (RGB)


def models():
    """name -> (config, model class, Optimum task[, extra]), built lazily so that --help needs no torch;
    extra: `shapes`, Optimum's dummy input sizes, and `axes`, bindings of axis names beyond
    dims_of's."""
    import transformers as T
    kv = dict(num_key_value_heads=2, **SMALL)
    return {
        "bert": (T.BertConfig(vocab_size=VOCAB, **SMALL), T.BertForSequenceClassification,
                 "text-classification"),
        "roberta": (T.RobertaConfig(vocab_size=VOCAB, **SMALL), T.RobertaForMaskedLM, "fill-mask"),
        "distilbert": (T.DistilBertConfig(vocab_size=VOCAB, dim=128, n_layers=2, n_heads=4, hidden_dim=512),
                       T.DistilBertForTokenClassification, "token-classification"),
        "gpt2": (T.GPT2Config(vocab_size=VOCAB, n_embd=128, n_layer=2, n_head=4), T.GPT2LMHeadModel,
                 "text-generation-with-past"),
        "llama": (T.LlamaConfig(vocab_size=VOCAB, **kv), T.LlamaForCausalLM, "text-generation-with-past"),
        "qwen2": (T.Qwen2Config(vocab_size=VOCAB, **kv), T.Qwen2ForCausalLM, "text-generation-with-past"),
        "gemma2": (T.Gemma2Config(vocab_size=VOCAB, head_dim=32, **kv), T.Gemma2ForCausalLM,
                   "text-generation-with-past"),
        "phi3": (T.Phi3Config(vocab_size=VOCAB, pad_token_id=0, **kv), T.Phi3ForCausalLM,
                 "text-generation-with-past"),
        "mistral": (T.MistralConfig(vocab_size=VOCAB, **kv), T.MistralForCausalLM, "text-generation-with-past"),
        "bart": (T.BartConfig(vocab_size=VOCAB, d_model=128, encoder_layers=2, decoder_layers=2,
                              encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=512,
                              decoder_ffn_dim=512), T.BartForConditionalGeneration, "text2text-generation-with-past"),
        "opt": (T.OPTConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                            ffn_dim=512, word_embed_proj_dim=128), T.OPTForCausalLM, "text-generation-with-past"),
        "falcon": (T.FalconConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2, num_attention_heads=4),
                   T.FalconForCausalLM, "text-generation-with-past"),
        "bloom": (T.BloomConfig(vocab_size=VOCAB, hidden_size=128, n_layer=2, n_head=4), T.BloomForCausalLM,
                  "text-generation-with-past"),
        "gpt_neox": (T.GPTNeoXConfig(vocab_size=VOCAB, **SMALL), T.GPTNeoXForCausalLM, "text-generation-with-past"),
        "whisper": (T.WhisperConfig(vocab_size=VOCAB, d_model=128, encoder_layers=2, decoder_layers=2,
                                    encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=512,
                                    decoder_ffn_dim=512, num_mel_bins=16, max_source_positions=32,
                                    max_target_positions=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                    decoder_start_token_id=1), T.WhisperForConditionalGeneration,
                    "automatic-speech-recognition-with-past",
                    # 64 frames of 16 mel bins (2 x max_source_positions)
                    dict(shapes=dict(nb_max_frames=64), axes=dict(feature_size=16, encoder_sequence_length=64))),
        "t5": (T.T5Config(vocab_size=VOCAB, d_model=128, d_ff=512, num_layers=2, num_heads=4, d_kv=32,
                          decoder_start_token_id=0), T.T5ForConditionalGeneration, "text2text-generation-with-past"),
        "albert": (T.AlbertConfig(vocab_size=VOCAB, embedding_size=64, **SMALL), T.AlbertForMaskedLM, "fill-mask"),
        "deberta_v2": (T.DebertaV2Config(vocab_size=VOCAB, **SMALL), T.DebertaV2ForSequenceClassification,
                       "text-classification"),
        "electra": (T.ElectraConfig(vocab_size=VOCAB, embedding_size=128, **SMALL), T.ElectraForTokenClassification,
                    "token-classification"),
        "mpnet": (T.MPNetConfig(vocab_size=VOCAB, **SMALL), T.MPNetModel, "feature-extraction"),
        "wav2vec2": (T.Wav2Vec2Config(vocab_size=32, **SMALL, conv_dim=(32, 32), conv_stride=(5, 2),
                                      conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4),
                     T.Wav2Vec2ForCTC, "automatic-speech-recognition",
                     dict(axes=dict(sequence_length=800))),  # samples, whatever the data set's sequence
        "swin": (T.SwinConfig(image_size=IMAGE, patch_size=4, embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                              window_size=4), T.SwinForImageClassification, "image-classification"),
        "convnext": (T.ConvNextConfig(image_size=IMAGE, hidden_sizes=[32, 64], depths=[2, 2], num_stages=2),
                     T.ConvNextForImageClassification, "image-classification"),
        "segformer": (T.SegformerConfig(image_size=IMAGE, num_encoder_blocks=2, depths=[2, 2], sr_ratios=[2, 1],
                                        hidden_sizes=[32, 64], num_attention_heads=[1, 2], decoder_hidden_size=64,
                                        num_labels=4, patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[4, 4]),
                      T.SegformerForSemanticSegmentation, "semantic-segmentation"),
        # a second round: more decoders, encoders, encoder-decoders, speech and vision
        "qwen3": (T.Qwen3Config(vocab_size=VOCAB, head_dim=32, **kv), T.Qwen3ForCausalLM, "text-generation-with-past"),
        "stablelm": (T.StableLmConfig(vocab_size=VOCAB, **kv), T.StableLmForCausalLM, "text-generation-with-past"),
        "granite": (T.GraniteConfig(vocab_size=VOCAB, **kv), T.GraniteForCausalLM, "text-generation-with-past"),
        "olmo": (T.OlmoConfig(vocab_size=VOCAB, pad_token_id=0, **kv), T.OlmoForCausalLM,
                 "text-generation-with-past"),
        "phi": (T.PhiConfig(vocab_size=VOCAB, **SMALL), T.PhiForCausalLM, "text-generation-with-past"),
        "gpt_bigcode": (T.GPTBigCodeConfig(vocab_size=VOCAB, n_embd=128, n_layer=2, n_head=4),
                        T.GPTBigCodeForCausalLM, "text-generation-with-past"),
        "codegen": (T.CodeGenConfig(vocab_size=VOCAB, n_embd=128, n_layer=2, n_head=4, rotary_dim=16),
                    T.CodeGenForCausalLM, "text-generation-with-past"),
        "gptj": (T.GPTJConfig(vocab_size=VOCAB, n_embd=128, n_layer=2, n_head=4, rotary_dim=16), T.GPTJForCausalLM,
                 "text-generation-with-past"),
        "cohere": (T.CohereConfig(vocab_size=VOCAB, pad_token_id=0, **kv), T.CohereForCausalLM,
                   "text-generation-with-past"),
        "mobilebert": (T.MobileBertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2,
                                          num_attention_heads=4, intermediate_size=128, embedding_size=64,
                                          intra_bottleneck_size=64, true_hidden_size=64),
                       T.MobileBertForSequenceClassification, "text-classification"),
        "squeezebert": (T.SqueezeBertConfig(vocab_size=VOCAB, embedding_size=128, **SMALL),
                        T.SqueezeBertForSequenceClassification, "text-classification"),
        "xlm_roberta": (T.XLMRobertaConfig(vocab_size=VOCAB, **SMALL), T.XLMRobertaForSequenceClassification,
                        "text-classification"),
        "m2m100": (T.M2M100Config(vocab_size=VOCAB, d_model=128, encoder_layers=2, decoder_layers=2,
                                  encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=512,
                                  decoder_ffn_dim=512), T.M2M100ForConditionalGeneration,
                   "text2text-generation-with-past"),
        "marian": (T.MarianConfig(vocab_size=VOCAB, d_model=128, encoder_layers=2, decoder_layers=2,
                                  encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=512,
                                  decoder_ffn_dim=512, pad_token_id=0, decoder_start_token_id=0),
                   T.MarianMTModel, "text2text-generation-with-past"),
        "hubert": (T.HubertConfig(vocab_size=32, **SMALL, conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
                                  num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4),
                   T.HubertForCTC, "automatic-speech-recognition", dict(axes=dict(sequence_length=800))),
        "beit": (T.BeitConfig(image_size=IMAGE, patch_size=16, use_relative_position_bias=True, **SMALL),
                 T.BeitForImageClassification, "image-classification"),
        "deit": (T.DeiTConfig(image_size=IMAGE, patch_size=16, **SMALL), T.DeiTForImageClassification,
                 "image-classification"),
        "levit": (T.LevitConfig(image_size=IMAGE, hidden_sizes=[64, 96, 128], num_attention_heads=[2, 3, 4],
                                depths=[1, 1, 1], key_dim=[16, 16, 16]), T.LevitForImageClassification,
                  "image-classification"),
        "mobilenet_v2": (T.MobileNetV2Config(image_size=IMAGE, depth_multiplier=0.35),
                         T.MobileNetV2ForImageClassification, "image-classification"),
        "resnet": (T.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1]),
                   T.ResNetForImageClassification, "image-classification"),
        "mobilevit": (T.MobileViTConfig(image_size=IMAGE, hidden_sizes=[32, 48, 64], neck_hidden_sizes=[8, 16, 24, 32,
                                                                                                     40, 48, 160]),
                      T.MobileViTForImageClassification, "image-classification"),
        "vit": (T.ViTConfig(image_size=IMAGE, patch_size=16, **SMALL), T.ViTForImageClassification,
                "image-classification"),
    }


def dims_of(vi, b, s, past, axes):
    """An input's shape at batch b, sequence s and past length past, from Optimum's axis names (an
    encoder's sequence, which a decoder attends to, as long as the decoder's whole sequence)."""
    names = {"batch_size": b, "sequence_length": s, "past_sequence_length": past,
             "past_sequence_length + sequence_length": past + s, "encoder_sequence_length": past + s,
             "decoder_sequence_length": s, "past_decoder_sequence_length": past,
             "past_decoder_sequence_length + 1": past + 1, "encoder_sequence_length_out": past + s,
             "num_channels": 3, "height": IMAGE, "width": IMAGE, **axes}
    out = []
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            out.append(d.dim_value)
        elif d.dim_param in names:
            out.append(names[d.dim_param])
        else:
            sys.exit(f"{vi.name}: no binding for the axis '{d.dim_param}'")
    return out


def make_inputs(model, b, s, past, seed, axes):
    """Inputs by name: token ids below VOCAB, a mask padding the second sequence's last 5 tokens,
    positions after the past, zero token types, Gaussian pixels, past keys and values, encoder
    states."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        shape, n = dims_of(vi, b, s, past, axes), vi.name
        np_type = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        if n in ("input_ids", "decoder_input_ids"):
            v = rng.integers(0, VOCAB, shape)
        elif n.endswith("attention_mask"):
            v = np.ones(shape)
            if b > 1 and shape[1] > 6:
                v[1, -5:] = 0
        elif n == "position_ids":
            v = np.broadcast_to(np.arange(past, past + s), shape)
        elif n == "token_type_ids":
            v = np.zeros(shape)
        elif n == "use_cache_branch":  # a merged decoder: the branch that reads the past
            v = np.full(shape, past > 0)
        else:  # pixel_values, input_features, past_key_values.*, encoder_hidden_states
            v = rng.standard_normal(shape)
        feeds[n] = np.ascontiguousarray(v.astype(np_type))
    return feeds


def time_flags(model, has_past, axes):
    """stitchc's flags for timing an export on a GPU (bench/gpu/run_exports.sh reads them from the
    file time_shapes): batch 8 x sequence 128, a decoding step at batch 8 after 127 tokens (a merged
    decoder's branch with the past), images at batch 32. Inputs without dynamic axes need none."""
    b, s, past = (8, 1, 127) if has_past else (8, 128, 0)
    flags = []
    for vi in model.graph.input:
        if vi.name == "use_cache_branch":
            flags.append("--constant-input use_cache_branch=1")
        elif any(d.HasField("dim_param") for d in vi.type.tensor_type.shape.dim):
            dims = dims_of(vi, 32 if vi.name == "pixel_values" else b, s, past, axes)
            flags.append(f"--shape {vi.name}={'x'.join(map(str, dims))}")
    return " ".join(flags)


def save_set(model_path, feeds, d):
    import onnxruntime as ort
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    outs = sess.run(None, feeds)
    os.makedirs(d, exist_ok=True)
    for i, (n, v) in enumerate(feeds.items()):
        onnx.save_tensor(numpy_helper.from_array(v, n), os.path.join(d, f"input_{i}.pb"))
    for i, (o, v) in enumerate(zip(sess.get_outputs(), outs)):
        onnx.save_tensor(numpy_helper.from_array(v, o.name), os.path.join(d, f"output_{i}.pb"))


def export(name, cfg, cls, task, out, extra=None):
    import torch
    from optimum.exporters.onnx import main_export
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        src, raw = os.path.join(tmp, "src"), os.path.join(tmp, "onnx")
        cls(cfg).eval().save_pretrained(src)
        extra = extra or {}
        main_export(src, output=raw, task=task, **extra.get("shapes", {}))
        for f in sorted(os.listdir(raw)):
            if not f.endswith(".onnx"):
                continue
            part = f[:-len(".onnx")].replace("_model", "").replace("model", "")
            d = os.path.join(out, name + ("_" + part if part else ""))
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            m = onnx.load(os.path.join(raw, f))  # external data, if any, loaded and saved inline
            path = os.path.join(d, "model.onnx")
            onnx.save(m, path)
            has_past = any(i.name.startswith("past_key_values") for i in m.graph.input)
            if any(i.name == "use_cache_branch" for i in m.graph.input):
                # bindings.py turns it into --constant-input, one branch per data set
                with open(os.path.join(d, "constant_inputs"), "w") as f:
                    f.write("use_cache_branch\n")
            sets = [(b, 1, s - 1) for b, s in SHAPES] if has_past else [(b, s, 0) for b, s in SHAPES]
            if has_past:
                sets.append((SHAPES[0][0], SHAPES[0][1], 0))  # the prefill, past empty
            for k, (b, s, past) in enumerate(sets):
                feeds = make_inputs(m, b, s, past, k, extra.get("axes", {}))
                save_set(path, feeds, os.path.join(d, f"test_data_set_{k}"))
            with open(os.path.join(d, "time_shapes"), "w") as f:
                f.write(time_flags(m, has_past, extra.get("axes", {})) + "\n")
            print(f"{os.path.basename(d)}: {len(m.graph.node)} nodes, {len(sets)} data sets")


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return
    out, names = sys.argv[1], sys.argv[2:]
    table = models()
    for n in names or table:
        if n not in table:
            sys.exit(f"unknown model '{n}': one of {', '.join(table)}")
        try:
            export(n, *table[n][:3], out, *table[n][3:])
        except Exception as e:  # the others still export; the message says which failed and why
            print(f"{n}: export failed: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
