"""export.py's models, first half: BERT, GPT-2 and LLaMA and the dense transformer architectures
tried after them (2026-11-24 to 26), in float32 and half precision, their vision and speech kin, one
decoding step with a KV cache, and the wide configs. The sizes and builders here are shared with
more_models.py. Tooling only."""
import torch

from exporters import export_decoder, export_tensor, export_text, export_text_loss

# The small sizes most architectures are tried at (2 layers; hidden 128 and 4 heads unless said),
# and builders of the table's entries: each entry is a function of the output directory.
bert_small = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512)
small = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
             vocab_size=1000)
gpt2 = dict(n_embd=128, n_layer=2, n_head=4)
llama = dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
             intermediate_size=688, vocab_size=1000)
t5 = dict(d_model=128, d_kv=32, d_ff=512, num_layers=2, num_heads=4, vocab_size=1000)
vit = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512, image_size=64,
           patch_size=8)
swin = dict(image_size=64, patch_size=4, embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=4)
gqa = dict(num_key_value_heads=2)


def text(name, make, keys=("last_hidden_state",), vocab=1000, dynamo=True, opset=18):
    return lambda o: export_text(name, make, list(keys), vocab, dynamo, opset, o)


def hf(name, cfg, model, **extra):
    """A transformers model at the small size, with these config fields changed."""
    return text(name, lambda: model(cfg(**{**small, **extra})))


def tensor(make, shape, dynamo=True, opset=18):
    return lambda o: export_tensor(None, make, "last_hidden_state", shape, dynamo, opset, o)


def dec(make, dynamo=True, opset=18):
    return lambda o: export_decoder(None, make, 2, dynamo, opset, o)


def random_expert_biases(model):
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".experts." in name and name.endswith("_bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return model


def random_router_gates(model):
    """Router weights drawn at random where the model's own initialization leaves them zero (AFMoE):
    with every expert's score equal, which experts TopK picks is only its tie-break, and ONNX's
    TopK takes the lower index where PyTorch's need not, so the data sets would test the tie-break
    instead of the model. Trained checkpoints have no such ties."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".router.gate." in name and name.endswith("weight") and not p.any():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    return model


def text_models():
    import transformers as tf
    bert_base = dict(hidden_size=768, num_hidden_layers=2, num_attention_heads=12, intermediate_size=3072)

    t = {
        "bert_base_2l": text("bert_base_2l", lambda: tf.BertModel(tf.BertConfig(**bert_base)),
                             ("last_hidden_state", "pooler_output"), 30522, False, 16),
        # 12 layers: the planning and compile-time targets' size; named only (440 MB of weights)
        "bert_base_12l": text("bert_base_12l",
                              lambda: tf.BertModel(tf.BertConfig(**{**bert_base, "num_hidden_layers": 12})),
                              ("last_hidden_state", "pooler_output"), 30522, False, 16),
        "bert_dynamo": text("bert_dynamo", lambda: tf.BertModel(tf.BertConfig(**bert_small)), vocab=30522),
        # A token classifier with its cross-entropy loss in the graph (SoftmaxCrossEntropyLoss with
        # ignore_index -100), through both exporters.
        "bert_token_loss": lambda o: export_text_loss(
            None, lambda: tf.BertForTokenClassification(tf.BertConfig(**bert_small, num_labels=5)), 5, True, 18, o),
        "bert_token_loss_ts": lambda o: export_text_loss(
            None, lambda: tf.BertForTokenClassification(tf.BertConfig(**bert_small, num_labels=5)), 5, False, 17, o),
        "gpt2_dynamo": text("gpt2_dynamo", lambda: tf.GPT2Model(tf.GPT2Config(**gpt2)), vocab=50257),
        "llama_2l": text("llama_2l", lambda: tf.LlamaModel(tf.LlamaConfig(**llama))),
        "llama_ts": text("llama_ts", lambda: tf.LlamaModel(tf.LlamaConfig(**llama)), dynamo=False, opset=17),
    }
    # More architectures, each small (hidden 128, 4 heads, 2 layers, vocabulary 1000), through
    # torch.export unless said: post-norm encoders (DistilBERT through TorchScript, RoBERTa with
    # its position ids from a CumSum of the mask), parallel attention and MLP with partial rotary
    # (GPT-NeoX, Phi), grouped-query decoders (Mistral with a sliding window, Qwen2 with Q/K/V
    # biases), ALiBi (BLOOM, whose Q/K/V are Gathers of one view), T5's encoder (relative position
    # buckets, RMSNorm without a mean, through TorchScript).



    distil = dict(dim=128, n_layers=2, n_heads=4, hidden_dim=512, vocab_size=1000)
    bloom = dict(hidden_size=128, n_layer=2, n_head=4, vocab_size=1000)
    t.update({
        "distilbert": text("distilbert", lambda: tf.DistilBertModel(tf.DistilBertConfig(**distil)),
                           dynamo=False, opset=17),
        "roberta_dynamo": hf("roberta_dynamo", tf.RobertaConfig, tf.RobertaModel),
        "gpt_neox": hf("gpt_neox", tf.GPTNeoXConfig, tf.GPTNeoXModel, rotary_pct=0.25),
        "phi": hf("phi", tf.PhiConfig, tf.PhiModel, partial_rotary_factor=0.5),
        "mistral": hf("mistral", tf.MistralConfig, tf.MistralModel, num_key_value_heads=2, sliding_window=16),
        "qwen2": hf("qwen2", tf.Qwen2Config, tf.Qwen2Model, num_key_value_heads=2),
        "bloom": text("bloom", lambda: tf.BloomModel(tf.BloomConfig(**bloom))),
        "t5_enc": text("t5_enc", lambda: tf.T5EncoderModel(tf.T5Config(**t5)), dynamo=False, opset=17),
    })
    # And more, tried 2026-11-24 (same sizes): OPT (ReLU, learned positions from a CumSum, also
    # through TorchScript), Falcon (parallel attention and MLP off one norm, one K/V head picked
    # with GatherND), GPT-J, ALBERT and ELECTRA (embeddings projected up), DeBERTa-v2, MPNet
    # (relative position bias), Gemma (one K/V head), Phi-3 (fused Q/K/V and gate/up weights),
    # StableLM (LayerNorm with a SiLU gate), MobileBERT (bottlenecks, four FFNs per layer, NoNorm),
    # XLM-RoBERTa through TorchScript.
    opt = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, ffn_dim=512,
               word_embed_proj_dim=128, vocab_size=1000)
    mobilebert = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
                      embedding_size=64, intra_bottleneck_size=64, vocab_size=1000)
    t.update({
        "opt": text("opt", lambda: tf.OPTModel(tf.OPTConfig(**opt))),
        "opt_ts": text("opt_ts", lambda: tf.OPTModel(tf.OPTConfig(**opt)), dynamo=False, opset=17),
        "falcon": text("falcon", lambda: tf.FalconModel(tf.FalconConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=1000))),
        "gptj": text("gptj", lambda: tf.GPTJModel(tf.GPTJConfig(n_embd=128, n_layer=2, n_head=4, rotary_dim=16,
                                                                  vocab_size=1000))),
        "albert": hf("albert", tf.AlbertConfig, tf.AlbertModel, embedding_size=64),
        "electra": hf("electra", tf.ElectraConfig, tf.ElectraModel, embedding_size=64),
        "deberta_v2": hf("deberta_v2", tf.DebertaV2Config, tf.DebertaV2Model),
        "mpnet": hf("mpnet", tf.MPNetConfig, tf.MPNetModel),
        "gemma": hf("gemma", tf.GemmaConfig, tf.GemmaModel, num_key_value_heads=1, head_dim=32),
        "phi3": hf("phi3", tf.Phi3Config, tf.Phi3Model, num_key_value_heads=2, pad_token_id=0),
        "stablelm": hf("stablelm", tf.StableLmConfig, tf.StableLmModel, num_key_value_heads=2),
        "mobilebert": text("mobilebert", lambda: tf.MobileBertModel(tf.MobileBertConfig(**mobilebert))),
        "xlm_roberta_ts": text("xlm_roberta_ts", lambda: tf.XLMRobertaModel(tf.XLMRobertaConfig(**small)),
                               dynamo=False, opset=17),
    })
    # Half precision, as models are deployed on the GPU (tried 2026-11-24): the same small configs
    # with their weights and compute in float16 or bfloat16 (PyTorch's CPU kernels compute the
    # reference in that type, rounding each op's output).
    half, bf16 = torch.float16, torch.bfloat16
    t.update({
        "bert_f16": text("bert_f16", lambda: tf.BertModel(tf.BertConfig(**small)).to(half)),
        "gpt2_f16": text("gpt2_f16", lambda: tf.GPT2Model(tf.GPT2Config(**gpt2, vocab_size=1000)).to(half)),
        "llama_f16": text("llama_f16", lambda: tf.LlamaModel(tf.LlamaConfig(**llama)).to(half)),
        "llama_bf16": text("llama_bf16", lambda: tf.LlamaModel(tf.LlamaConfig(**llama)).to(bf16)),
        "bert_bf16": text("bert_bf16", lambda: tf.BertModel(tf.BertConfig(**small)).to(bf16)),
        # 12 layers in float16: whether the float16 tolerance holds through a full-depth model
        "bert_base_12l_f16": text("bert_base_12l_f16",
                                  lambda: tf.BertModel(tf.BertConfig(**{**bert_base, "num_hidden_layers": 12})).to(half),
                                  ("last_hidden_state", "pooler_output"), 30522),
    })
    # Vision and speech transformers (tried 2026-11-24): ViT and Whisper's encoder (patch or
    # convolution stems, erf GELU) through torch.export, Swin (windows shifted by Slices and
    # Concats, patch merging) through TorchScript (torch.export cannot take its view).
    whisper = dict(d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512, num_mel_bins=80,
                   max_source_positions=64, vocab_size=1000, pad_token_id=0, decoder_start_token_id=1,
                   bos_token_id=1, eos_token_id=2)
    t.update({
        "vit": tensor(lambda: tf.ViTModel(tf.ViTConfig(**vit)), (2, 3, 64, 64)),
        "whisper_enc": tensor(lambda: tf.WhisperModel(tf.WhisperConfig(**whisper)).get_encoder(), (2, 80, 128)),
        "swin": tensor(lambda: tf.SwinModel(tf.SwinConfig(**swin)), (2, 3, 64, 64), dynamo=False, opset=17),
    })
    # One decoding step with a KV cache, as a generation loop runs it after the prompt (tried
    # 2026-11-24): the cache concatenated with the new token's keys and values, attention of one
    # query over past + 1 keys. torch.export names the mask's length `past + 1`.
    t.update({
        "gpt2_dec": dec(lambda: tf.GPT2Model(tf.GPT2Config(**gpt2, vocab_size=1000))),
        "llama_dec": dec(lambda: tf.LlamaModel(tf.LlamaConfig(**llama))),
        "llama_dec_ts": dec(lambda: tf.LlamaModel(tf.LlamaConfig(**llama)), dynamo=False, opset=17),
        "mistral_dec": dec(lambda: tf.MistralModel(tf.MistralConfig(**small, num_key_value_heads=2))),
        "qwen2_dec": dec(lambda: tf.Qwen2Model(tf.Qwen2Config(**small, num_key_value_heads=2))),
    })
    # More architectures (tried 2026-11-24, same small sizes): Gemma2 (logits soft-capped by tanh,
    # norms after attention and MLP too), GPT-BigCode (one K/V head fused with Q), StarCoder2, OLMo
    # (LayerNorm without weights), Cohere (LayerNorm without bias, parallel attention and MLP), CLIP's
    # text encoder (causal, quick GELU), BART whole (encoder, decoder, cross-attention), wav2vec2 (a
    # convolution stem with GroupNorm, a grouped positional convolution), SegFormer (attention over a
    # strided convolution of its keys, depthwise convolutions in the MLP), DINOv2 (layer scale).
    t.update({
        "gemma2": hf("gemma2", tf.Gemma2Config, tf.Gemma2Model, num_key_value_heads=2, head_dim=32,
                     sliding_window=16),
        "gpt_bigcode": text("gpt_bigcode", lambda: tf.GPTBigCodeModel(tf.GPTBigCodeConfig(
            n_embd=128, n_layer=2, n_head=4, vocab_size=1000, multi_query=True))),
        "starcoder2": hf("starcoder2", tf.Starcoder2Config, tf.Starcoder2Model, num_key_value_heads=2),
        "olmo": hf("olmo", tf.OlmoConfig, tf.OlmoModel),
        "cohere": hf("cohere", tf.CohereConfig, tf.CohereModel, num_key_value_heads=2),
        "clip_text": text("clip_text", lambda: tf.CLIPTextModel(tf.CLIPTextConfig(
            hidden_size=128, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, vocab_size=1000,
            max_position_embeddings=64)), ("last_hidden_state", "pooler_output")),
        "bart": text("bart", lambda: tf.BartModel(tf.BartConfig(
            d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=512, decoder_ffn_dim=512, vocab_size=1000, max_position_embeddings=64)),
            ("last_hidden_state", "encoder_last_hidden_state")),
        "wav2vec2": tensor(lambda: tf.Wav2Vec2Model(tf.Wav2Vec2Config(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
            conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=4)), (2, 4000)),
        "segformer": tensor(lambda: tf.SegformerModel(tf.SegformerConfig(
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[32, 64], patch_sizes=[7, 3],
            strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[4, 4])), (2, 3, 64, 64)),
        "dinov2": tensor(lambda: tf.Dinov2Model(tf.Dinov2Config(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512, image_size=64,
            patch_size=8)), (2, 3, 64, 64)),
    })
    # More architectures (tried 2026-11-25, same small sizes): Qwen3 and OLMo2 (RMSNorm on Q and K
    # per head, or over all heads after the projection), ModernBERT (GeGLU, no biases, local and
    # global attention), MPT (ALiBi without biases), GPT-Neo (local attention, unscaled scores),
    # CodeGen (Q/K/V split from one interleaved projection), Nemotron (squared ReLU, LayerNorm with
    # weight + 1, partial rotary), Granite (embedding, residual and logit multipliers), XGLM
    # (sinusoidal positions), Persimmon (LayerNorm on Q and K), BEiT (relative position bias,
    # layer scale), Mixtral (a mixture of experts: top-2 routing).
    t.update({
        "qwen3": hf("qwen3", tf.Qwen3Config, tf.Qwen3Model, num_key_value_heads=2, head_dim=32),
        "olmo2": hf("olmo2", tf.Olmo2Config, tf.Olmo2Model),
        "modernbert": text("modernbert", lambda: tf.ModernBertModel(tf.ModernBertConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256, vocab_size=1000,
            local_attention=16, global_attn_every_n_layers=2, pad_token_id=0, bos_token_id=1, eos_token_id=2,
            cls_token_id=1, sep_token_id=2))),
        "mpt": text("mpt", lambda: tf.MptModel(tf.MptConfig(d_model=128, n_heads=4, n_layers=2, vocab_size=1000))),
        "gpt_neo": text("gpt_neo", lambda: tf.GPTNeoModel(tf.GPTNeoConfig(
            hidden_size=128, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]], window_size=16,
            vocab_size=1000))),
        "codegen": text("codegen", lambda: tf.CodeGenModel(tf.CodeGenConfig(
            n_embd=128, n_layer=2, n_head=4, rotary_dim=16, vocab_size=1000))),
        "nemotron": hf("nemotron", tf.NemotronConfig, tf.NemotronModel, num_key_value_heads=2),
        "granite": hf("granite", tf.GraniteConfig, tf.GraniteModel, num_key_value_heads=2, embedding_multiplier=2.0,
                      residual_multiplier=0.5, attention_multiplier=0.1),
        "xglm": text("xglm", lambda: tf.XGLMModel(tf.XGLMConfig(
            d_model=128, num_layers=2, attention_heads=4, ffn_dim=512, vocab_size=1000))),
        "persimmon": hf("persimmon", tf.PersimmonConfig, tf.PersimmonModel, qk_layernorm=True),
        "beit": tensor(lambda: tf.BeitModel(tf.BeitConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512, image_size=64,
            patch_size=8, use_relative_position_bias=True, layer_scale_init_value=0.1)), (2, 3, 64, 64), dynamo=False,
            opset=17),
        # Mixtral exports with neither exporter in transformers' default expert form (2026-11-25); with
        # the batched_mm form (as the mixtures of experts below) it does, through torch.export
        "mixtral": text("mixtral", lambda: tf.MixtralModel(tf.MixtralConfig(
            **small, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
            experts_implementation="batched_mm"))),
    })
    # And (tried 2026-11-25, same small sizes) encoders whose attention is written with Einsum:
    # XLNet (two-stream relative attention, an EyeLike; TorchScript: torch.export cannot decompose
    # it) and Funnel (pooled queries; torch.export fixes its sequence at 32, so only the first data
    # set binds), and RemBERT, RoFormer and SqueezeBERT (grouped 1x1 convolutions as its Linears).
    t.update({
        "xlnet": text("xlnet", lambda: tf.XLNetModel(tf.XLNetConfig(d_model=128, n_layer=2, n_head=4, d_inner=512,
                                                                       vocab_size=1000)), dynamo=False, opset=17),
        "funnel": text("funnel", lambda: tf.FunnelModel(tf.FunnelConfig(d_model=128, n_head=4, d_head=32, d_inner=512,
                                                                          block_sizes=[1, 1], vocab_size=1000))),
        "rembert": hf("rembert", tf.RemBertConfig, tf.RemBertModel, input_embedding_size=64, output_embedding_size=64),
        "roformer": hf("roformer", tf.RoFormerConfig, tf.RoFormerModel),
        "squeezebert": hf("squeezebert", tf.SqueezeBertConfig, tf.SqueezeBertModel, embedding_size=128),
    })
    # And more (tried 2026-11-26, same sizes, configs as below): Gemma 3 (norms before and after
    # each block, Q/K norms), GLM (Q/K/V biases, interleaved partial rotary) and GLM-4 (norms after
    # each block too), OLMo 3 and EXAONE 4 (norms after each block, Q/K norms), BitNet (norms
    # inside attention and the MLP, before their output GEMMs), DiffLlama (differential
    # attention), HunYuan dense (Q/K norms), Apertus, Arcee, Cohere 2, ERNIE 4.5, BioGPT, Seed-OSS,
    # Helium, SmolLM3 and EuroBERT.
    t.update({
        "gemma3_text": hf("gemma3_text", tf.Gemma3TextConfig, tf.Gemma3TextModel, num_key_value_heads=1, head_dim=32,
                          sliding_window=16),
        "glm": hf("glm", tf.GlmConfig, tf.GlmModel, **gqa, pad_token_id=0),
        "glm4": hf("glm4", tf.Glm4Config, tf.Glm4Model, **gqa, pad_token_id=0),
        "olmo3": hf("olmo3", tf.Olmo3Config, tf.Olmo3Model, **gqa, sliding_window=16),
        "exaone4": hf("exaone4", tf.Exaone4Config, tf.Exaone4Model, **gqa, sliding_window=16),
        "bitnet": hf("bitnet", tf.BitNetConfig, tf.BitNetModel, **gqa),
        "diffllama": hf("diffllama", tf.DiffLlamaConfig, tf.DiffLlamaModel, **gqa),
        "hunyuan": hf("hunyuan", tf.HunYuanDenseV1Config, tf.HunYuanDenseV1Model, **gqa, head_dim=32),
        "apertus": hf("apertus", tf.ApertusConfig, tf.ApertusModel, **gqa),
        "arcee": hf("arcee", tf.ArceeConfig, tf.ArceeModel, **gqa),
        "cohere2": hf("cohere2", tf.Cohere2Config, tf.Cohere2Model, **gqa, sliding_window=16),
        "ernie4_5": hf("ernie4_5", tf.Ernie4_5Config, tf.Ernie4_5Model, **gqa),
        "biogpt": hf("biogpt", tf.BioGptConfig, tf.BioGptModel),
        "seed_oss": hf("seed_oss", tf.SeedOssConfig, tf.SeedOssModel, **gqa, head_dim=32),
        "helium": hf("helium", tf.HeliumConfig, tf.HeliumModel, **gqa, head_dim=32),
        "smollm3": hf("smollm3", tf.SmolLM3Config, tf.SmolLM3Model, **gqa, pad_token_id=0),
        "eurobert": hf("eurobert", tf.EuroBertConfig, tf.EuroBertModel, **gqa, pad_token_id=0),
    })
    # At the widths of the models they stand for (hidden 1024 with 16 heads, or ViT-B/16 at 224),
    # 2 layers, named only (60 to 110 MB): where the small configs keep projections as loops in
    # kernels, these show the per-layer kernels at the sizes models are deployed at (compiled at
    # batch 8, sequence 128, as docs/fusion-results.md says).
    wide = dict(hidden_size=1024, num_hidden_layers=2, num_attention_heads=16, intermediate_size=2816,
                vocab_size=1000)
    vit_b = dict(hidden_size=768, num_hidden_layers=2, num_attention_heads=12, intermediate_size=3072,
                 image_size=224, patch_size=16)
    hf_wide = lambda name, cfg, model, **extra: text(name, lambda: model(cfg(**{**wide, **extra})))
    t.update({
        "llama_wide": hf_wide("llama_wide", tf.LlamaConfig, tf.LlamaModel, num_key_value_heads=4),
        "phi3_wide": hf_wide("phi3_wide", tf.Phi3Config, tf.Phi3Model, num_key_value_heads=4, pad_token_id=0),
        "gemma2_wide": hf_wide("gemma2_wide", tf.Gemma2Config, tf.Gemma2Model, num_key_value_heads=4, head_dim=64,
                               sliding_window=16),
        "olmo_wide": hf_wide("olmo_wide", tf.OlmoConfig, tf.OlmoModel),
        "stablelm_wide": hf_wide("stablelm_wide", tf.StableLmConfig, tf.StableLmModel, num_key_value_heads=4),
        "vit_base_2l": tensor(lambda: tf.ViTModel(tf.ViTConfig(**vit_b)), (2, 3, 224, 224)),
        "dinov2_base_2l": tensor(lambda: tf.Dinov2Model(tf.Dinov2Config(**vit_b)), (2, 3, 224, 224)),
        "gpt2_wide": text("gpt2_wide", lambda: tf.GPT2Model(tf.GPT2Config(n_embd=768, n_layer=2, n_head=12,
                                                                          vocab_size=1000))),
        "gpt_neox_wide": hf_wide("gpt_neox_wide", tf.GPTNeoXConfig, tf.GPTNeoXModel),
        "bloom_wide": text("bloom_wide", lambda: tf.BloomModel(tf.BloomConfig(hidden_size=1024, n_layer=2, n_head=16,
                                                                              vocab_size=1000))),
        "opt_wide": text("opt_wide", lambda: tf.OPTModel(tf.OPTConfig(
            hidden_size=1024, num_hidden_layers=2, num_attention_heads=16, ffn_dim=4096, word_embed_proj_dim=1024,
            vocab_size=1000))),
        "falcon_wide": text("falcon_wide", lambda: tf.FalconModel(tf.FalconConfig(
            hidden_size=1024, num_hidden_layers=2, num_attention_heads=16, vocab_size=1000))),
        "qwen3_wide": hf_wide("qwen3_wide", tf.Qwen3Config, tf.Qwen3Model, num_key_value_heads=4, head_dim=64),
    })
    return t
