"""export.py's models, second half: mixtures of experts, vision and audio models, CNNs, recurrent
and state-space models, and the exports derived from others (onnxruntime's transformer optimizer,
older opsets, quantized forms, onnxruntime-genai's builder). Tooling only."""
import torch

from exporters import (AsDict, LegacyBert, Seq2Seq, WhisperLogMel, converted, export_cnn, export_diffusers_unet,
                       export_tensor, ort_optimized, quantized, save_case)
from text_models import (bert_small, dec, gpt2, gqa, hf, llama, random_expert_biases, random_router_gates, small,
                         swin, t5, tensor, text, vit)


def more_models(t):
    import transformers as tf
    import torchvision.models as tv
    half = torch.float16
    # And more (tried 2026-11-26, later; same small sizes): mixtures of experts through torch.export
    # (DeepSeek-V3 with latent attention and a dense first layer, Qwen2-MoE with a gated shared expert,
    # Qwen3-MoE, OLMoE, GPT-OSS with attention sinks), Megatron-BERT (pre-norm BERT), ConvBERT
    # (span-based dynamic convolution), LFM2 (short gated convolutions between attention layers).
    # The experts as batched GEMMs over each token's chosen experts' weights: transformers' default
    # (grouped_mm) is a custom op the ONNX exporter cannot translate.
    moe = dict(num_experts_per_tok=2, experts_implementation="batched_mm")
    t.update({
        "deepseek_v3": hf("deepseek_v3", tf.DeepseekV3Config, tf.DeepseekV3Model, **moe, kv_lora_rank=32,
                          q_lora_rank=64, qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=32, n_routed_experts=4,
                          first_k_dense_replace=1, moe_intermediate_size=128, n_group=1, topk_group=1),
        # DeepSeek-V3's routing limited to groups as its real config uses it (there 8 groups of 32
        # experts, the best 4 groups): 8 experts in 4 groups, the top 2 of each group summed to its
        # score, the best 2 groups kept by a scattered mask, then the top 2 experts
        "deepseek_v3_groups": hf("deepseek_v3_groups", tf.DeepseekV3Config, tf.DeepseekV3Model, **moe,
                                 kv_lora_rank=32, q_lora_rank=64, qk_rope_head_dim=16, qk_nope_head_dim=16,
                                 v_head_dim=32, n_routed_experts=8, first_k_dense_replace=1,
                                 moe_intermediate_size=128, n_group=4, topk_group=2),
        "qwen2_moe": hf("qwen2_moe", tf.Qwen2MoeConfig, tf.Qwen2MoeModel, **moe, **gqa, num_experts=4,
                        moe_intermediate_size=128, shared_expert_intermediate_size=256),
        "qwen3_moe": hf("qwen3_moe", tf.Qwen3MoeConfig, tf.Qwen3MoeModel, **moe, **gqa, num_experts=4,
                        moe_intermediate_size=128, head_dim=32),
        "olmoe": hf("olmoe", tf.OlmoeConfig, tf.OlmoeModel, **moe, **gqa, num_experts=4),
        "gpt_oss": hf("gpt_oss", tf.GptOssConfig, tf.GptOssModel, **moe, **gqa, num_local_experts=4, head_dim=32,
                      sliding_window=16),
        # gpt-oss with its experts' biases drawn at random (transformers starts them at zero, which
        # would leave the biases' path through the rewrites unchecked).
        "gpt_oss_biased": text("gpt_oss_biased", lambda: random_expert_biases(tf.GptOssModel(tf.GptOssConfig(
            **{**small, **moe, **gqa, "num_local_experts": 4, "head_dim": 32, "sliding_window": 16})))),
        "megatron_bert": hf("megatron_bert", tf.MegatronBertConfig, tf.MegatronBertModel),
        "convbert": hf("convbert", tf.ConvBertConfig, tf.ConvBertModel, embedding_size=128),
        "lfm2": hf("lfm2", tf.Lfm2Config, tf.Lfm2Model, **gqa, layer_types=["conv", "full_attention"]),
    })
    # Vision and audio (tried 2026-11-26, later): DeiT (a distillation token), SigLIP's and CLIP's
    # vision towers (pooled: an attention-pooling head, a post-norm of the class token), ConvNeXt V2
    # (global response norm), MobileViT (unfolded patches between convolutions), LeViT (attention
    # biases, Hardswish, BatchNorm after each Linear), PoolFormer (average pooling as the token mixer),
    # FocalNet (focal modulation), Swin V2 (cosine attention, a log-spaced position MLP; TorchScript),
    # WavLM (gated relative position bias) and AST (a spectrogram's patches).
    img = (2, 3, 64, 64)
    vis = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512, image_size=64,
               patch_size=8)
    t.update({
        "deit": tensor(lambda: tf.DeiTModel(tf.DeiTConfig(**vis)), img),
        "siglip_vision": (lambda o: export_tensor(None, lambda: tf.SiglipVisionModel(tf.SiglipVisionConfig(**vis)),
                                                  "pooler_output", img, True, 18, o)),
        "clip_vision": (lambda o: export_tensor(None, lambda: tf.CLIPVisionModel(tf.CLIPVisionConfig(**vis)),
                                                "pooler_output", img, True, 18, o)),
        "convnextv2": tensor(lambda: tf.ConvNextV2Model(tf.ConvNextV2Config(
            num_stages=2, hidden_sizes=[32, 64], depths=[1, 1], image_size=64)), img),
        "mobilevit": tensor(lambda: tf.MobileViTModel(tf.MobileViTConfig(image_size=64)), img),
        "levit": tensor(lambda: tf.LevitModel(tf.LevitConfig(image_size=64)), img),
        "poolformer": tensor(lambda: tf.PoolFormerModel(tf.PoolFormerConfig(
            hidden_sizes=[32, 64, 96, 128], depths=[1, 1, 1, 1])), img),
        "focalnet": tensor(lambda: tf.FocalNetModel(tf.FocalNetConfig(
            image_size=64, embed_dim=32, depths=[1, 1], hidden_sizes=[32, 64])), img),
        "swinv2": tensor(lambda: tf.Swinv2Model(tf.Swinv2Config(**swin)), img, dynamo=False, opset=17),
        "wavlm": tensor(lambda: tf.WavLMModel(tf.WavLMConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
            conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=4, num_buckets=32, max_bucket_distance=64)), (2, 4000)),
        "ast": tensor(lambda: tf.ASTModel(tf.ASTConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512, num_mel_bins=64,
            max_length=128)), (2, 128, 64)),
    })
    # And a second round the same day: ESM (a rotary encoder), XLM-RoBERTa-XL (pre-norm), mBART
    # (encoder and decoder), GraniteMoE and PhiMoE (mixtures of experts), Mamba and
    # RecurrentGemma (recurrences written out over the sequence), DINOv2 with registers, PVTv2, CvT
    # (convolutional projections with BatchNorm), HF's ResNet and ConvNeXt through torch.export,
    # MobileViTV2 (separable self-attention), SwiftFormer (additive attention), ViTDet (windows and
    # relative positions), HuBERT and SEW (a squeezed sequence).
    wav = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
               conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
               num_conv_pos_embedding_groups=4)
    t.update({
        "esm": hf("esm", tf.EsmConfig, tf.EsmModel, position_embedding_type="rotary", pad_token_id=1,
                  mask_token_id=2),
        "xlm_roberta_xl": hf("xlm_roberta_xl", tf.XLMRobertaXLConfig, tf.XLMRobertaXLModel),
        "mbart": text("mbart", lambda: tf.MBartModel(tf.MBartConfig(
            d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=512, decoder_ffn_dim=512, vocab_size=1000, max_position_embeddings=64)),
            ("last_hidden_state", "encoder_last_hidden_state")),
        "granitemoe": hf("granitemoe", tf.GraniteMoeConfig, tf.GraniteMoeModel, **moe, **gqa, num_local_experts=4),
        "phimoe": hf("phimoe", tf.PhimoeConfig, tf.PhimoeModel, **moe, **gqa, num_local_experts=4),
        # Routers over 16 experts: more than the short maxima take (2 to 8), as real MoE models have.
        "phimoe16": hf("phimoe16", tf.PhimoeConfig, tf.PhimoeModel, **moe, **gqa, num_local_experts=16),
        "ernie4_5_moe": hf("ernie4_5_moe", tf.Ernie4_5_MoeConfig, tf.Ernie4_5_MoeModel, **moe, **gqa,
                           moe_num_experts=4, moe_intermediate_size=128),
        "dots1": hf("dots1", tf.Dots1Config, tf.Dots1Model, **moe, **gqa, n_routed_experts=4, n_shared_experts=1,
                    moe_intermediate_size=128, first_k_dense_replace=1, n_group=1, topk_group=1, head_dim=32),
        "dots1_16": hf("dots1_16", tf.Dots1Config, tf.Dots1Model, **moe, **gqa, n_routed_experts=16,
                       n_shared_experts=1, moe_intermediate_size=64, first_k_dense_replace=1, n_group=1,
                       topk_group=1, head_dim=32),
        "flex_olmo": hf("flex_olmo", tf.FlexOlmoConfig, tf.FlexOlmoModel, **moe, **gqa, num_experts=4,
                        pad_token_id=0, eos_token_id=1, bos_token_id=None),
        "mamba": text("mamba", lambda: tf.MambaModel(tf.MambaConfig(hidden_size=128, num_hidden_layers=2,
                                                                       vocab_size=1000, state_size=16))),
        "recurrent_gemma": text("recurrent_gemma", lambda: tf.RecurrentGemmaModel(tf.RecurrentGemmaConfig(
            hidden_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1, intermediate_size=256,
            vocab_size=1000, attention_window_size=16, lru_width=128,
            block_types=("recurrent", "recurrent", "attention")))),
        "dinov2_reg": tensor(lambda: tf.Dinov2WithRegistersModel(tf.Dinov2WithRegistersConfig(
            **vis, num_register_tokens=4)), img),
        "pvt_v2": tensor(lambda: tf.PvtV2Model(tf.PvtV2Config(
            num_encoder_blocks=2, hidden_sizes=[32, 64], depths=[1, 1], num_attention_heads=[1, 2], sr_ratios=[2, 1],
            patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[4, 4], image_size=64)), img),
        # CvT's stage s indexes its drop-path rates, one per layer of that stage: depth[s] > s
        "cvt": tensor(lambda: tf.CvtModel(tf.CvtConfig(embed_dim=[32, 64, 128], num_heads=[1, 2, 4],
                                                       depth=[1, 2, 3])), img),
        "resnet_hf": tensor(lambda: tf.ResNetModel(tf.ResNetConfig(
            embedding_size=32, hidden_sizes=[32, 64], depths=[1, 1], layer_type="basic")), img),
        "convnext_hf": tensor(lambda: tf.ConvNextModel(tf.ConvNextConfig(
            num_stages=2, hidden_sizes=[32, 64], depths=[1, 1])), img),
        "mobilevitv2": tensor(lambda: tf.MobileViTV2Model(tf.MobileViTV2Config(image_size=64)), img),
        "swiftformer": tensor(lambda: tf.SwiftFormerModel(tf.SwiftFormerConfig(
            depths=[1, 1, 1, 1], embed_dims=[16, 32, 48, 64])), img),
        "vitdet": tensor(lambda: tf.VitDetModel(tf.VitDetConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, image_size=64, patch_size=8, window_size=4,
            window_block_indices=[0], residual_block_indices=[1], use_relative_position_embeddings=True)), img),
        "hubert": tensor(lambda: tf.HubertModel(tf.HubertConfig(**wav)), (2, 4000)),
        "sew": tensor(lambda: tf.SEWModel(tf.SEWConfig(**wav, squeeze_factor=2)), (2, 4000)),
    })
    # And a third round: T5, Pegasus and Marian whole (encoder and decoder, the sequence fed to both:
    # Seq2Seq), BigBird and Longformer (sparse and sliding-window attention at these lengths).
    seq2seq = dict(d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512, vocab_size=1000,
                   max_position_embeddings=64, pad_token_id=0, decoder_start_token_id=0)
    both = ("last_hidden_state", "encoder_last_hidden_state")
    t.update({
        # T5 and Longformer through TorchScript: torch.export cannot take T5's attention view or
        # Longformer's chunked windows
        "t5": text("t5", lambda: Seq2Seq(tf.T5Model(tf.T5Config(**t5))), both, dynamo=False, opset=17),
        "pegasus": text("pegasus", lambda: Seq2Seq(tf.PegasusModel(tf.PegasusConfig(**seq2seq))), both),
        "marian": text("marian", lambda: Seq2Seq(tf.MarianModel(tf.MarianConfig(**seq2seq))), both),
        "bigbird": hf("bigbird", tf.BigBirdConfig, tf.BigBirdModel, attention_type="block_sparse", block_size=4,
                      num_random_blocks=2),
        "longformer": text("longformer", lambda: tf.LongformerModel(tf.LongformerConfig(**small, attention_window=8)),
                           dynamo=False, opset=17),
    })
    # The torchvision CNNs; the second line tried 2026-11-26, later: squeeze-excitation (RegNetY,
    # MnasNet), dense concatenation (DenseNet), fire modules (SqueezeNet), inception branches
    # (GoogLeNet), fused MBConv (EfficientNetV2), inverted residuals (MobileNetV2), grouped
    # convolutions (ResNeXt).
    for n in ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2_x0_5", "convnext_tiny",
              "regnet_y_400mf", "mnasnet0_5", "densenet121", "squeezenet1_0", "googlenet", "efficientnet_v2_s",
              "mobilenet_v2", "resnext50_32x4d"]:
        t[n] = (lambda ctor: lambda o: export_cnn(None, ctor, o))(getattr(tv, n))
    # GroupNorm (tried 2026-11-26): exported as a Reshape into groups, an InstanceNormalization and
    # a Reshape back before the channel weight and bias. ResNet-18 with GroupNorm(8) in place of
    # BatchNorm (TorchScript, as the CNNs above), and BiT (ResNetV2: GroupNorm, weight-standardized
    # convolutions, pre-activation) through torch.export.
    t["resnet18_gn"] = lambda o: export_cnn(
        None, lambda weights: tv.resnet18(weights=weights, norm_layer=lambda c: torch.nn.GroupNorm(8, c)), o)
    t["whisper_logmel"] = lambda o: export_tensor(None, lambda: AsDict(WhisperLogMel(), "log_mel"), "log_mel",
                                                  (2, 16000), False, 17, o)
    # Models of the opsets the ONNX model zoo's classics were written in (tried 2026-11-27): nodes in
    # their old forms (Slice's and Pad's bounds and Clip's as attributes, Upsample), read by
    # ir/legacy_forms.h.
    t["resnet18_opset9"] = lambda o: export_cnn(None, tv.resnet18, o, opset=9)
    t["mobilenet_v2_opset10"] = lambda o: export_cnn(None, tv.mobilenet_v2, o, opset=10)
    # Older still (tried 2026-11-27, later): ResNet-18 written down to opsets 3 and 1 by ONNX's version
    # converter (consumed_inputs, Gemm's broadcast attribute), as Caffe2's conversions of opset 3 are.
    t["resnet18_opset3"] = converted(t["resnet18_opset9"], 3)
    t["resnet18_opset1"] = converted(t["resnet18_opset9"], 1)
    t["bert_opset10"] = text("bert_opset10", lambda: tf.BertModel(tf.BertConfig(**bert_small,
                                                                               attn_implementation="eager")),
                             vocab=30522, dynamo=False, opset=10)
    t["bit"] = tensor(lambda: tf.BitModel(tf.BitConfig(
        embedding_size=32, hidden_sizes=[64, 128], depths=[1, 1], num_groups=8)), (2, 3, 64, 64))
    # Diffusion UNets from diffusers (tried 2026-11-26): GroupNorm + SiLU residual blocks with the
    # timestep embedding added, self-attention blocks, and (conditional) cross-attention to text states.
    t["unet2d"] = lambda o: export_diffusers_unet(False, o)
    t["unet2d_cond"] = lambda o: export_diffusers_unet(True, o)
    # Opset 23 (tried 2026-11-26): PyTorch writes scaled_dot_product_attention as the Attention op
    # and nn.RMSNorm (LLaMA's and Qwen3's norms) as RMSNormalization there.
    t.update({
        "llama_op23": text("llama_op23", lambda: tf.LlamaModel(tf.LlamaConfig(**llama)), opset=23),
        "qwen3_op23": text("qwen3_op23", lambda: tf.Qwen3Model(tf.Qwen3Config(
            **small, num_key_value_heads=2, head_dim=32)), opset=23),
        "bert_op23": text("bert_op23", lambda: tf.BertModel(tf.BertConfig(**bert_small)), vocab=30522, opset=23),
        "vit_op23": tensor(lambda: tf.ViTModel(tf.ViTConfig(**vit)), (2, 3, 64, 64), opset=23),
        "llama_dec_op23": dec(lambda: tf.LlamaModel(tf.LlamaConfig(**llama)), opset=23),
        "llama_f16_op23": text("llama_f16_op23", lambda: tf.LlamaModel(tf.LlamaConfig(**llama)).to(half),
                               opset=23),
        # Opsets 24 and 25 (tried 2026-11-26): the same ops as at 23 (the exporter's highest opsets
        # that its version converter reaches; at 26 and above it leaves the model unconverted).
        "llama_op25": text("llama_op25", lambda: tf.LlamaModel(tf.LlamaConfig(**llama)), opset=25),
        "llama_dec_op25": dec(lambda: tf.LlamaModel(tf.LlamaConfig(**llama)), opset=25),
        "qwen3_op24": text("qwen3_op24", lambda: tf.Qwen3Model(tf.Qwen3Config(
            **small, num_key_value_heads=2, head_dim=32)), opset=24),
    })
    # A fourth round (tried 2026-11-27, same small sizes): state-space models and hybrids (Mamba-2's
    # chunked scan, Falcon-Mamba, Jamba, Zamba2, Bamba, Falcon-H1), linear attention (Qwen3-Next's
    # gated delta rule, MiniMax's lightning attention, RWKV), JetMoE (a mixture of attention heads),
    # GLM-4-MoE, Gemma 3n (AltUp, LAuReL, per-layer embeddings), Doge, VaultGemma, FNet (a Fourier
    # transform for attention), CANINE (characters downsampled by a strided convolution), X-MOD
    # (language adapters), SpeechT5's HiFi-GAN vocoder (transposed convolutions), Swin2SR
    # (PixelShuffle: DepthToSpace).
    ssm = dict(mamba_d_state=16, mamba_chunk_size=16)
    t.update({
        "mamba2": text("mamba2", lambda: tf.Mamba2Model(tf.Mamba2Config(
            hidden_size=128, num_hidden_layers=2, vocab_size=1000, state_size=16, num_heads=8, head_dim=32, n_groups=1,
            chunk_size=16))),
        "falcon_mamba": text("falcon_mamba", lambda: tf.FalconMambaModel(tf.FalconMambaConfig(
            hidden_size=128, num_hidden_layers=2, vocab_size=1000, state_size=16))),
        "jamba": hf("jamba", tf.JambaConfig, tf.JambaModel, **gqa, num_experts=4, **moe,
                    expert_layer_period=2, expert_layer_offset=1, attn_layer_period=2, attn_layer_offset=1,
                    mamba_d_state=16),
        "zamba2": text("zamba2", lambda: tf.Zamba2Model(tf.Zamba2Config(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, intermediate_size=256,
            vocab_size=1000, mamba_d_state=16, mamba_headdim=32, n_mamba_heads=8, layers_block_type=["mamba", "hybrid"],
            chunk_size=16, use_mem_rope=True))),
        "bamba": hf("bamba", tf.BambaConfig, tf.BambaModel, **gqa, **ssm, mamba_n_heads=8, mamba_d_head=32,
                    attn_layer_indices=[1]),
        "falcon_h1": hf("falcon_h1", tf.FalconH1Config, tf.FalconH1Model, **gqa, **ssm, mamba_d_ssm=256,
                        mamba_n_heads=8, mamba_d_head=32),
        "qwen3_next": hf("qwen3_next", tf.Qwen3NextConfig, tf.Qwen3NextModel, **gqa, head_dim=32,
                         linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=32,
                         linear_value_head_dim=32, num_experts=4, **moe, moe_intermediate_size=128,
                         shared_expert_intermediate_size=128, layer_types=["linear_attention", "full_attention"]),
        "minimax": hf("minimax", tf.MiniMaxConfig, tf.MiniMaxModel, **gqa, head_dim=32, num_local_experts=4,
                      **moe, layer_types=["linear_attention", "full_attention"], block_size=16),
        "rwkv": text("rwkv", lambda: tf.RwkvModel(tf.RwkvConfig(
            hidden_size=128, num_hidden_layers=2, vocab_size=1000, attention_hidden_size=128, intermediate_size=512,
            context_length=64))),
        "jetmoe": text("jetmoe", lambda: tf.JetMoeModel(tf.JetMoeConfig(
            hidden_size=128, num_hidden_layers=2, num_key_value_heads=4, kv_channels=32, intermediate_size=256,
            num_local_experts=4, vocab_size=1000, **moe))),
        "glm4_moe": hf("glm4_moe", tf.Glm4MoeConfig, tf.Glm4MoeModel, **gqa, head_dim=32, n_routed_experts=4,
                       **moe, moe_intermediate_size=128, first_k_dense_replace=1, n_group=1,
                       topk_group=1),
        "gemma3n": hf("gemma3n", tf.Gemma3nTextConfig, tf.Gemma3nTextModel, **gqa, head_dim=32,
                      vocab_size_per_layer_input=1000, hidden_size_per_layer_input=32, laurel_rank=16,
                      altup_num_inputs=4, num_kv_shared_layers=0, sliding_window=16,
                      layer_types=["sliding_attention", "full_attention"], activation_sparsity_pattern=[0.0, 0.0]),
        # Doge through TorchScript: torch.export cannot view its attention output back into rows
        "doge": text("doge", lambda: tf.DogeModel(tf.DogeConfig(**small, **gqa)), dynamo=False, opset=17),
        "vaultgemma": hf("vaultgemma", tf.VaultGemmaConfig, tf.VaultGemmaModel, **gqa, head_dim=32,
                         sliding_window=16),
        "fnet": text("fnet", lambda: tf.FNetModel(tf.FNetConfig(
            hidden_size=128, num_hidden_layers=2, intermediate_size=512, vocab_size=1000,
            use_tpu_fourier_optimizations=False))),
        "canine": text("canine", lambda: tf.CanineModel(tf.CanineConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512, downsampling_rate=4))),
        "xmod": hf("xmod", tf.XmodConfig, tf.XmodModel, default_language="en_XX", languages=["en_XX"]),
        # SpeechT5's HiFi-GAN vocoder: a mel spectrogram [batch, frames, 80] upsampled 16x to a
        # waveform by two ConvTranspose1d (stride 4, kernel 8) and dilated residual convolutions
        "hifigan": tensor(lambda: AsDict(tf.SpeechT5HifiGan(tf.SpeechT5HifiGanConfig(
            model_in_dim=80, upsample_initial_channel=32, upsample_rates=[4, 4], upsample_kernel_sizes=[8, 8],
            resblock_kernel_sizes=[3], resblock_dilation_sizes=[[1, 3]], normalize_before=False)),
            "last_hidden_state"), (2, 16, 80)),
        # Swin2SR's super-resolution: Swin layers, then a convolution and PixelShuffle (DepthToSpace)
        # doubling the image; through TorchScript, as Swin
        "swin2sr": tensor(lambda: AsDict(tf.Swin2SRForImageSuperResolution(tf.Swin2SRConfig(
            image_size=16, patch_size=1, embed_dim=32, depths=[2], num_heads=[2], window_size=4, upscale=2,
            upsampler="pixelshuffle", mlp_ratio=2.0)), "last_hidden_state", "reconstruction"), (1, 3, 16, 16),
            dynamo=False, opset=17),
    })
    # A fifth round (tried 2026-11-27, later): dense prediction and detection (DPT and Depth
    # Anything's reassembly and fusion necks with align-corners upsampling, GLPN, DETR with a
    # ResNet backbone, its sine positions from a CumSum of the pixel mask, YOLOS's detection tokens,
    # UperNet's pyramid pooling over a ConvNeXt), SAM's image encoder (windows padded, decomposed
    # relative positions; TorchScript), video (VideoMAE's tubelets: Conv3d; TimeSformer's divided space-time
    # attention), Perceiver (cross-attention to latents), XLNet (two-stream relative attention;
    # TorchScript), Funnel (the sequence pooled between blocks; torch.export fixes the sequence
    # length, and TorchScript's trace is right only at its own), the Conformer (a depthwise
    # convolution module), PatchTST (a time series scaled by its own mean and deviation), and
    # Encodec's encoder (an LSTM; TorchScript, as SAM: torch.export cannot take either).
    dino = dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128, image_size=56,
                patch_size=14, out_features=["stage1", "stage2", "stage3", "stage4"],
                reshape_hidden_states=False)
    t.update({
        "dpt": tensor(lambda: AsDict(tf.DPTForDepthEstimation(tf.DPTConfig(
            hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=256, image_size=64,
            patch_size=16, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[16, 32, 64, 128],
            fusion_hidden_size=32, head_in_index=-1)), "last_hidden_state", "predicted_depth"), (1, 3, 64, 64)),
        "depth_anything": tensor(lambda: AsDict(tf.DepthAnythingForDepthEstimation(tf.DepthAnythingConfig(
            backbone_config=tf.Dinov2Config(**dino), reassemble_hidden_size=64, patch_size=14,
            neck_hidden_sizes=[16, 32, 64, 64], fusion_hidden_size=32, head_hidden_size=16)),
            "last_hidden_state", "predicted_depth"), (1, 3, 56, 56)),
        "glpn": tensor(lambda: AsDict(tf.GLPNForDepthEstimation(tf.GLPNConfig(
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[4, 2], hidden_sizes=[16, 32], patch_sizes=[7, 3],
            strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=16)),
            "last_hidden_state", "predicted_depth"), (1, 3, 64, 64)),
        "detr": tensor(lambda: tf.DetrModel(tf.DetrConfig(
            use_timm_backbone=False, use_pretrained_backbone=False, backbone=None,
            backbone_config=tf.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                            out_features=["stage4"]),
            d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=128, decoder_ffn_dim=128, num_queries=10)), (1, 3, 64, 64)),
        # Multi-scale deformable attention: each query's sampling points read the feature maps through
        # GridSample (bilinear, zeros padding). RT-DETR through torch.export (opset 18).
        "deformable_detr": tensor(lambda: AsDict(tf.DeformableDetrModel(tf.DeformableDetrConfig(
            use_timm_backbone=False, use_pretrained_backbone=False, backbone=None,
            backbone_config=tf.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                            out_features=["stage2", "stage3", "stage4"]),
            d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10, num_feature_levels=3, encoder_n_points=2,
            decoder_n_points=2)), "last_hidden_state", "last_hidden_state"), (1, 3, 64, 64), dynamo=False, opset=17),
        "rt_detr": tensor(lambda: AsDict(tf.RTDetrModel(tf.RTDetrConfig(
            backbone_config=tf.RTDetrResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128],
                                                  depths=[1, 1, 1, 1], out_features=["stage2", "stage3", "stage4"]),
            encoder_hidden_dim=32, encoder_in_channels=[32, 64, 128], feat_strides=[8, 16, 32], encoder_layers=1,
            encoder_ffn_dim=64, encoder_attention_heads=4, d_model=32, num_queries=20, decoder_layers=1,
            decoder_ffn_dim=64, decoder_attention_heads=4, decoder_n_points=4, num_feature_levels=3,
            num_denoising=0, anchor_image_size=None, decoder_in_channels=[32, 32, 32])),
            "last_hidden_state", "last_hidden_state"), (1, 3, 64, 64)),
        "yolos": tensor(lambda: tf.YolosModel(tf.YolosConfig(**{**vis, "image_size": [64, 64]},
                                                             num_detection_tokens=10), add_pooling_layer=False),
                        (1, 3, 64, 64)),
        "upernet": tensor(lambda: AsDict(tf.UperNetForSemanticSegmentation(tf.UperNetConfig(
            backbone_config=tf.ConvNextConfig(num_stages=4, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                              out_features=["stage1", "stage2", "stage3", "stage4"]),
            hidden_size=32, pool_scales=[1, 2, 3, 6], use_auxiliary_head=False, num_labels=5)),
            "last_hidden_state", "logits"), (1, 3, 192, 192)),
        "sam_vision": tensor(lambda: tf.SamVisionModel(tf.SamVisionConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, mlp_dim=256, image_size=80, patch_size=8,
            window_size=4, global_attn_indexes=[1], output_channels=64)), (1, 3, 80, 80), dynamo=False, opset=17),
        "videomae": tensor(lambda: tf.VideoMAEModel(tf.VideoMAEConfig(
            **{**vis, "image_size": 32}, num_frames=4, tubelet_size=2)), (1, 4, 3, 32, 32)),
        "timesformer": tensor(lambda: tf.TimesformerModel(tf.TimesformerConfig(
            **{**vis, "image_size": 32}, num_frames=4)), (1, 4, 3, 32, 32)),
        "perceiver": tensor(lambda: tf.PerceiverModel(tf.PerceiverConfig(
            num_latents=16, d_latents=64, d_model=32, num_blocks=1, num_self_attends_per_block=2,
            num_self_attention_heads=4, num_cross_attention_heads=1)), (2, 20, 32)),
        "xlnet": text("xlnet", lambda: tf.XLNetModel(tf.XLNetConfig(
            d_model=128, n_layer=2, n_head=4, d_inner=512, vocab_size=1000)), dynamo=False, opset=17),
        "funnel": text("funnel", lambda: tf.FunnelBaseModel(tf.FunnelConfig(
            d_model=128, n_head=4, d_head=32, d_inner=512, block_sizes=[1, 1], vocab_size=1000))),
        "wav2vec2_conformer": tensor(lambda: tf.Wav2Vec2ConformerModel(tf.Wav2Vec2ConformerConfig(
            **wav, position_embeddings_type="rotary", conv_depthwise_kernel_size=15)), (2, 4000)),
        "patchtst": tensor(lambda: tf.PatchTSTModel(tf.PatchTSTConfig(
            num_input_channels=3, context_length=64, patch_length=8, patch_stride=8, d_model=64,
            num_attention_heads=4, num_hidden_layers=2, ffn_dim=128)), (2, 64, 3)),
        "encodec": tensor(lambda: AsDict(tf.EncodecModel(tf.EncodecConfig(
            hidden_size=32, num_filters=8, num_residual_layers=1, upsampling_ratios=[4, 2], codebook_size=64,
            codebook_dim=32, num_lstm_layers=1)).encoder, "last_hidden_state"), (2, 1, 800), dynamo=False, opset=17),
    })

    # Recurrent text models (tried 2026-11-27, later), through both exporters: a tagger (an
    # embedding, a 2-layer bidirectional LSTM, batch first, and a linear head) and a GRU encoder.
    class Tagger(torch.nn.Module):
        def __init__(self, rnn):
            super().__init__()
            self.emb, self.rnn, self.head = torch.nn.Embedding(1000, 64), rnn, torch.nn.Linear(2 * 48, 16)

        def forward(self, input_ids, attention_mask):  # padding zeroed, as a tagger's embeddings are
            y, _ = self.rnn(self.emb(input_ids) * attention_mask.unsqueeze(-1).to(torch.float32))
            return {"last_hidden_state": self.head(y)}

    lstm = lambda: Tagger(torch.nn.LSTM(64, 48, num_layers=2, batch_first=True, bidirectional=True))
    gru = lambda: Tagger(torch.nn.GRU(64, 48, batch_first=True, bidirectional=True))
    t.update({
        "lstm_tagger": text("lstm_tagger", lstm),
        "lstm_tagger_ts": text("lstm_tagger_ts", lstm, dynamo=False, opset=17),
        "gru_tagger": text("gru_tagger", gru),
        "gru_tagger_ts": text("gru_tagger_ts", gru, dynamo=False, opset=17),
    })

    # Quantized (tried 2026-11-27): ONNX Runtime's quantize_dynamic on two BERT exports (int8
    # weights, DynamicQuantizeLinear and MatMulInteger) and its static quantizer's operator format
    # (QLinearMatMul), and its MatMulNBits quantizer (int4 weights), onnxruntime's outputs as expected.
    t.update({
        "bert_dyn": quantized(t["bert_dynamo"], "dynamic"),
        "bert_base_2l_dyn": quantized(t["bert_base_2l"], "dynamic"),
        "bert_qop": quantized(t["bert_dynamo"], "operator"),
        "bert_int4": quantized(t["bert_dynamo"], "int4"),
        "llama_int4": quantized(t["llama_ts"], "int4"),
    })

    # onnxruntime-genai's model builder (tried 2026-11-28, bench/exports/genai_export.py): a LLaMA
    # decoder as genai runs it, GroupQueryAttention with its KV cache; PyTorch's logits and caches.
    def genai(make, precision="fp32", provider="cpu", expect="pytorch"):
        def run(out):
            from genai_export import export_genai
            export_genai(make, save_case, out, precision, provider, expect)
        return run
    t.update({
        "llama_genai": genai(lambda: tf.LlamaForCausalLM(tf.LlamaConfig(**llama))),
        "llama_genai_int4": genai(lambda: tf.LlamaForCausalLM(tf.LlamaConfig(**llama)), "int4"),
        "llama_genai_f16": genai(lambda: tf.LlamaForCausalLM(tf.LlamaConfig(**llama)), "fp16"),
        "llama_genai_cuda_f16": genai(lambda: tf.LlamaForCausalLM(tf.LlamaConfig(**llama)), "fp16", "cuda"),
        # Qwen2's Q, K and V biases; Qwen3's per-head Q and K norms (written before the op); Phi-3;
        # Gemma's scaled embeddings and (1 + w) norms.
        "qwen2_genai": genai(lambda: tf.Qwen2ForCausalLM(tf.Qwen2Config(**small, num_key_value_heads=2))),
        "qwen3_genai": genai(lambda: tf.Qwen3ForCausalLM(tf.Qwen3Config(**small, num_key_value_heads=2,
                                                                           head_dim=32))),
        "phi3_genai": genai(lambda: tf.Phi3ForCausalLM(tf.Phi3Config(**small, num_key_value_heads=2,
                                                                        pad_token_id=0))),
        "gemma_genai": genai(lambda: tf.GemmaForCausalLM(tf.GemmaConfig(**small, num_key_value_heads=2,
                                                                           head_dim=32))),
        # Gemma 2: its sliding layer's cache is a window-sized buffer (sliding_window_cache=1), the
        # expected outputs onnxruntime's (genai_export.py); softcaps on scores and logits.
        "gemma2_genai": genai(lambda: tf.Gemma2ForCausalLM(tf.Gemma2Config(**small, num_key_value_heads=2,
                                                                              head_dim=32, sliding_window=16))),
        "gemma2_genai_cuda_f16": genai(lambda: tf.Gemma2ForCausalLM(tf.Gemma2Config(
            **small, num_key_value_heads=2, head_dim=32, sliding_window=16)), "fp16", "cuda"),
        # (tried 2026-11-28) Phi-2 (partial rotary, LayerNormalization, attention and MLP in
        # parallel) and Nemotron (relu^2, (1 + w) LayerNorm) at the epsilon the builder writes;
        # OLMo, whose LayerNorm the builder writes as an RMSNorm, against onnxruntime
        # (genai_export.py). Granite's multipliers, SmolLM3, Mistral, ERNIE 4.5 (head_dim 128 of
        # hidden 128), LFM2's attention layers (Q/K norms). Not here: Gemma 3 (the builder reads a
        # flat rope_parameters, transformers 5 writes one per layer type).
        "phi_genai": genai(lambda: tf.PhiForCausalLM(tf.PhiConfig(**small, num_key_value_heads=2,
                                                                    partial_rotary_factor=0.5, layer_norm_eps=1e-6))),
        "nemotron_genai": genai(lambda: tf.NemotronForCausalLM(tf.NemotronConfig(**small, num_key_value_heads=2,
                                                                                    norm_eps=1e-6))),
        "olmo_genai": genai(lambda: tf.OlmoForCausalLM(tf.OlmoConfig(**small, num_key_value_heads=2)),
                            expect="onnxruntime"),
        "granite_genai": genai(lambda: tf.GraniteForCausalLM(tf.GraniteConfig(**small, num_key_value_heads=2))),
        "smollm3_genai": genai(lambda: tf.SmolLM3ForCausalLM(tf.SmolLM3Config(**small, num_key_value_heads=2,
                                                                                pad_token_id=0))),
        "mistral_genai": genai(lambda: tf.MistralForCausalLM(tf.MistralConfig(**small, num_key_value_heads=2))),
        "ernie_genai": genai(lambda: tf.Ernie4_5ForCausalLM(tf.Ernie4_5Config(**small, num_key_value_heads=2))),
        "lfm2_genai": genai(lambda: tf.Lfm2ForCausalLM(tf.Lfm2Config(**small, num_key_value_heads=2))),
        # (tried 2026-11-28) gpt-oss: its experts one com.microsoft::MoE per layer (8 of them, the top
        # 2, clamped swiglu), head sinks in GroupQueryAttention, a window-sized cache in its sliding
        # layers; onnxruntime's outputs (genai_export.py).
        # (tried 2026-11-28) LFM2 with a convolution layer first (com.microsoft::CausalConvWithState,
        # its carry state an input and an output of the file) and an attention layer.
        "lfm2_conv_genai": genai(lambda: tf.Lfm2ForCausalLM(tf.Lfm2Config(**small, num_key_value_heads=2,
                                                                          layer_types=["conv", "full_attention"]))),
        "gptoss_genai": genai(lambda: tf.GptOssForCausalLM(tf.GptOssConfig(
            **small, num_key_value_heads=2, head_dim=32, num_local_experts=8, num_experts_per_tok=2,
            sliding_window=16))),
        "gptoss_genai_cuda_f16": genai(lambda: tf.GptOssForCausalLM(tf.GptOssConfig(
            **small, num_key_value_heads=2, head_dim=32, num_local_experts=8, num_experts_per_tok=2,
            sliding_window=16)), "fp16", "cuda"),
    })

    # Optimized by onnxruntime's transformer optimizer (tried 2026-11-27): its contrib ops
    # (SkipLayerNormalization, BiasGelu, FastGelu, SkipSimplifiedLayerNormalization, Attention,
    # EmbedLayerNormalization), PyTorch's outputs as expected.
    t.update({
        "bert_legacy": text("bert_legacy", LegacyBert, dynamo=False, opset=14),
        "bert_legacy_ort": ort_optimized(text("bert_legacy", LegacyBert, dynamo=False, opset=14), "bert", 4, 128),
        "bert_base_2l_ort": ort_optimized(t["bert_base_2l"], "bert", 12, 768),
        "bert_ort": ort_optimized(t["bert_dynamo"], "bert", 4, 128),
        "gpt2_ort": ort_optimized(text("gpt2_ts", lambda: tf.GPT2Model(tf.GPT2Config(**gpt2)), dynamo=False,
                                       opset=17), "gpt2", 4, 128),
        "llama_ort": ort_optimized(t["llama_ts"], "gpt2", 8, 256),
        "t5_enc_ort": ort_optimized(t["t5_enc"], "t5", 4, 128),
        "vit_ort": ort_optimized(t["vit"], "vit", 4, 128),
        # with onnxruntime's graph optimizations: level 1 wraps each projection's Gemm in Reshapes,
        # level 2 writes LLaMA's SiLU as QuickGelu
        "vit_ort1": ort_optimized(t["vit"], "vit", 4, 128, opt_level=1),
        "vit_ort2": ort_optimized(t["vit"], "vit", 4, 128, opt_level=2),
        "llama_ort2": ort_optimized(t["llama_ts"], "gpt2", 8, 256, opt_level=2),
        "bert_legacy_ort1": ort_optimized(text("bert_legacy", LegacyBert, dynamo=False, opset=14), "bert", 4, 128,
                                          opt_level=1),
        # attention as MultiHeadAttention (the optimizer's use_multi_head_attention)
        "bert_legacy_mha": ort_optimized(text("bert_legacy", LegacyBert, dynamo=False, opset=14), "bert", 4, 128,
                                         multi_head_attention=True),
    })
    # A sweep: 30 more exports through the optimizer, its model type per architecture and its heads
    # and width detected (0, 0). phi, modernbert, gpt2_dec and gpt2_f16 stop inside the optimizer (a
    # Python error).
    sweep = {"distilbert": "bert", "albert": "bert", "electra": "bert", "deberta_v2": "bert", "mpnet": "bert",
             "roberta_dynamo": "bert", "xlm_roberta_ts": "bert", "mobilebert": "bert", "megatron_bert": "bert",
             "convbert": "bert", "gpt_neox": "gpt_neox", "opt_ts": "gpt2", "gptj": "gpt2", "bloom": "gpt2",
             "gpt_bigcode": "gpt2", "bart": "bart", "t5": "t5", "whisper_enc": "bart", "clip_text": "clip",
             "clip_vision": "clip", "siglip_vision": "clip", "swin": "swin", "deit": "vit",
             # decoding steps, half types (the contrib ops in float16), opset 23's own ops
             "llama_dec": "gpt2", "mistral_dec": "gpt2", "qwen2_dec": "gpt2", "bert_f16": "bert",
             "llama_bf16": "gpt2", "bert_op23": "bert", "llama_op23": "gpt2"}
    t.update({n + "_ort": ort_optimized(t[n], model_type, 0, 0) for n, model_type in sweep.items()})
    # Architectures new in transformers 5.25 or not tried before (2026-12-05, same small sizes).
    # Dense: Ministral and Ministral 3, NanoChat, Jais 2, CWM, Mellum, Youtu, MiniCPM3 (latent
    # attention), Gemma 4's text model, the pre-norm RoBERTa, Data2Vec's text encoder, CamemBERT.
    # Mixtures of experts: DeepSeek-V2, GLM-4 MoE Lite, Cohere 2 MoE, EXAONE MoE, LFM2 MoE,
    # GraniteMoE with a shared expert, AFMoE, MiniMax-M2, Solar Open.
    t.update({
        "ministral": hf("ministral", tf.MinistralConfig, tf.MinistralModel, **gqa, head_dim=32, sliding_window=16),
        "ministral3": hf("ministral3", tf.Ministral3Config, tf.Ministral3Model, **gqa, head_dim=32),
        "nanochat": hf("nanochat", tf.NanoChatConfig, tf.NanoChatModel, **gqa),
        "jais2": hf("jais2", tf.Jais2Config, tf.Jais2Model, **gqa),
        "cwm": hf("cwm", tf.CwmConfig, tf.CwmModel, **gqa, head_dim=32, sliding_window=16),
        "mellum": hf("mellum", tf.MellumConfig, tf.MellumModel, **moe, **gqa, num_local_experts=4,
                     moe_intermediate_size=128),
        "youtu": hf("youtu", tf.YoutuConfig, tf.YoutuModel),
        "minicpm3": hf("minicpm3", tf.MiniCPM3Config, tf.MiniCPM3Model, q_lora_rank=64, kv_lora_rank=32,
                       qk_nope_head_dim=16, qk_rope_head_dim=16, v_head_dim=32),
        "gemma4_text": hf("gemma4_text", tf.Gemma4TextConfig, tf.Gemma4TextModel, num_key_value_heads=1,
                          head_dim=32, sliding_window=16),
        "roberta_prenorm": hf("roberta_prenorm", tf.RobertaPreLayerNormConfig, tf.RobertaPreLayerNormModel),
        "data2vec_text": hf("data2vec_text", tf.Data2VecTextConfig, tf.Data2VecTextModel),
        "camembert": hf("camembert", tf.CamembertConfig, tf.CamembertModel),
        "deepseek_v2": hf("deepseek_v2", tf.DeepseekV2Config, tf.DeepseekV2Model, **moe, kv_lora_rank=32,
                          q_lora_rank=64, qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=32, n_routed_experts=4,
                          first_k_dense_replace=1, moe_intermediate_size=128, n_group=1, topk_group=1),
        "glm4_moe_lite": hf("glm4_moe_lite", tf.Glm4MoeLiteConfig, tf.Glm4MoeLiteModel, **moe, n_routed_experts=4,
                            first_k_dense_replace=1, moe_intermediate_size=128, n_group=1, topk_group=1),
        "cohere2_moe": hf("cohere2_moe", tf.Cohere2MoeConfig, tf.Cohere2MoeModel, **moe, **gqa, num_experts=4,
                          sliding_window=16),
        "exaone_moe": hf("exaone_moe", tf.ExaoneMoeConfig, tf.ExaoneMoeModel, **moe, **gqa, num_experts=4,
                         moe_intermediate_size=128, sliding_window=16),
        "lfm2_moe": hf("lfm2_moe", tf.Lfm2MoeConfig, tf.Lfm2MoeModel, **moe, **gqa, num_experts=4,
                       moe_intermediate_size=128, layer_types=["conv", "full_attention"]),
        "granitemoe_shared": hf("granitemoe_shared", tf.GraniteMoeSharedConfig, tf.GraniteMoeSharedModel, **moe,
                                **gqa, num_local_experts=4, shared_intermediate_size=256),
        # its router's weights are zero as initialized: random ones (random_router_gates)
        "afmoe": hf("afmoe", tf.AfmoeConfig, lambda c: random_router_gates(tf.AfmoeModel(c)), **moe, **gqa,
                    num_experts=4, moe_intermediate_size=128),
        "minimax_m2": hf("minimax_m2", tf.MiniMaxM2Config, tf.MiniMaxM2Model, **moe, **gqa, num_local_experts=4,
                         head_dim=32),
        "solar_open": hf("solar_open", tf.SolarOpenConfig, tf.SolarOpenModel, **moe, **gqa, n_routed_experts=4,
                         moe_intermediate_size=128),
    })
    # A second batch the same day: Laguna, Flint, HY-V3, Mistral 4 (latent attention), GLM-MoE-DSA
    # (DeepSeek's sparse attention indexer), LongCat-Flash (zero-computation experts), MiMo-V2-Flash,
    # ZAYA (one expert a token), ModernBERT's decoder, and the hybrids with gated delta-rule linear
    # attention, Qwen3.5 (dense and MoE) and OLMo hybrid (a linear-attention layer, then a full one).
    E = dict(num_experts=4, n_routed_experts=4, num_local_experts=4, moe_intermediate_size=128)
    hybrid = dict(layer_types=["linear_attention", "full_attention"])
    t.update({
        "laguna": hf("laguna", tf.LagunaConfig, tf.LagunaModel, **moe, **gqa, **E),
        "flint": hf("flint", tf.FlintConfig, tf.FlintModel, **gqa),
        "hyv3": hf("hyv3", tf.HYV3Config, tf.HYV3Model, **moe, **gqa, **E),
        "mistral4": hf("mistral4", tf.Mistral4Config, tf.Mistral4Model, **moe, **E),
        "glm_moe_dsa": hf("glm_moe_dsa", tf.GlmMoeDsaConfig, tf.GlmMoeDsaModel, **moe, **E),
        "longcat_flash": hf("longcat_flash", tf.LongcatFlashConfig, tf.LongcatFlashModel, **moe, **E),
        "mimo_v2_flash": hf("mimo_v2_flash", tf.MiMoV2FlashConfig, tf.MiMoV2FlashModel, **moe, **gqa, **E),
        "zaya": hf("zaya", tf.ZayaConfig, tf.ZayaModel, **{**moe, "num_experts_per_tok": 1}, **gqa, **E),
        "modernbert_decoder": hf("modernbert_decoder", tf.ModernBertDecoderConfig, tf.ModernBertDecoderModel,
                                 pad_token_id=0),
        "qwen3_5_text": hf("qwen3_5_text", tf.Qwen3_5TextConfig, tf.Qwen3_5TextModel, **gqa, head_dim=32, **hybrid),
        "qwen3_5_moe_text": hf("qwen3_5_moe_text", tf.Qwen3_5MoeTextConfig, tf.Qwen3_5MoeTextModel, **moe, **gqa,
                               head_dim=32, num_experts=4, moe_intermediate_size=128,
                               shared_expert_intermediate_size=128, **hybrid),
        "olmo_hybrid": hf("olmo_hybrid", tf.OlmoHybridConfig, tf.OlmoHybridModel, **gqa, pad_token_id=0),
    })
    # Tried 2026-12-06 with transformers 5.25, each at the same fields (4 experts where it has them):
    # DeepSeek-V4 (hyper-connections whose mixing matrices are Sinkhorn-normalized 4 x 4), MiniCPM5-MoE,
    # xLSTM (mLSTM and sLSTM blocks), Lara-mini, Kolibri1, Ergo (a norm per routed expert), NeoMME,
    # Granite with sliding windows (dense and MoE), Inkling2 and HRM. Param2MoE and Sarvam-MoE build
    # GLM-4-MoE's model, InternLM3 and IQuest-Coder LLaMA's.
    new = dict(**moe, **gqa, head_dim=32, **E)
    t.update({
        n: hf(n, cfg, model, **new)
        for n, cfg, model in [
            ("deepseek_v4", tf.DeepseekV4Config, tf.DeepseekV4Model),
            ("minicpm5_moe", tf.MiniCPM5MoeConfig, tf.MiniCPM5MoeModel),
            ("xlstm", tf.xLSTMConfig, tf.xLSTMModel),
            ("lara_mini", tf.LaraMiniConfig, tf.LaraMiniModel),
            ("kolibri1", tf.Kolibri1Config, tf.Kolibri1Model),
            ("ergo", tf.ErgoConfig, tf.ErgoModel),
            ("neomme", tf.NeoMMEConfig, tf.NeoMMEModel),
            ("granite_swa", tf.GraniteSWAConfig, tf.GraniteSWAModel),
            ("granitemoe_swa", tf.GraniteMoeSWAConfig, tf.GraniteMoeSWAModel),
            ("inkling2_text", tf.Inkling2TextConfig, tf.Inkling2TextModel),
            ("hrm_text", tf.HrmTextConfig, tf.HrmTextModel),
        ]
    })
    # LFM3 (short convolutions) and HY-V4 (hyper-connections, an attention indexer), whose embeddings
    # default to a padding index outside a vocabulary of 1000.
    t.update({
        n: hf(n, cfg, model, **new, pad_token_id=0)
        for n, cfg, model in [
            ("lfm3", tf.Lfm3Config, tf.Lfm3Model),
            ("hy_v4", tf.HYV4Config, tf.HYV4Model),
        ]
    })
    # Kimi Linear (Kimi delta attention: the delta rule's solve with a decay per channel) and Bailing's
    # hybrid: a linear-attention layer, then a full one, and as many KV heads as heads.
    t.update({
        n: hf(n, cfg, model, **{**new, "num_key_value_heads": 4}, pad_token_id=0, **hybrid)
        for n, cfg, model in [
            ("kimi_linear", tf.KimiLinearConfig, tf.KimiLinearModel),
            ("bailing_hybrid", tf.BailingHybridConfig, tf.BailingHybridModel),
        ]
    })
    # Four that the round above could not export with these fields, with fields that fit them
    # (2026-12-06, later): DeepSeek-V3.2, Mistral Large 4's text model and Sarvam's MLA model take
    # DeepSeek-V3's latent-attention sizes; GLM-5-Next's text model as many KV heads as heads and a
    # padding index inside the vocabulary. Sarvam-MLA has no model class of its own: AutoModel's.
    mla = dict(kv_lora_rank=32, q_lora_rank=64, qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=32)
    t.update({
        "deepseek_v32": hf("deepseek_v32", tf.DeepseekV32Config, tf.DeepseekV32Model, **moe, **E, **mla,
                           n_group=1, topk_group=1, first_k_dense_replace=1),
        "mistral_large4": hf("mistral_large4", tf.MistralLarge4TextConfig, tf.MistralLarge4TextModel, **moe, **E,
                             **mla),
        "sarvam_mla": hf("sarvam_mla", tf.SarvamMLAConfig, tf.AutoModel.from_config, **moe, **E, **mla),
        "glm5_next": hf("glm5_next", tf.Glm5NextTextConfig, tf.Glm5NextTextModel, **moe, **E,
                        num_key_value_heads=4, head_dim=32, pad_token_id=0),
    })
    # Three of them at hidden 1024 with 16 heads (named only, as text_models.py's wide entries), for
    # the per-layer counts at a deployed width.
    wide = dict(hidden_size=1024, num_hidden_layers=2, num_attention_heads=16, intermediate_size=2816,
                vocab_size=1000)
    t.update({
        n: text(n, (lambda cfg, model, extra: lambda: model(cfg(**{**wide, **extra})))(cfg, model, extra))
        for n, cfg, model, extra in [
            ("ministral3_wide", tf.Ministral3Config, tf.Ministral3Model, dict(num_key_value_heads=4, head_dim=64)),
            ("nanochat_wide", tf.NanoChatConfig, tf.NanoChatModel, dict(num_key_value_heads=4)),
            ("jais2_wide", tf.Jais2Config, tf.Jais2Model, dict(num_key_value_heads=4)),
        ]
    })
    return t
