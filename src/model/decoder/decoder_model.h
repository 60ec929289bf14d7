// The decoder-only transformer of Qwen3, Qwen3-MoE, Qwen2 and Llama (their folders hold what tells
// them apart: the config reader and the architecture's registry entry): its weights
// (decoder_weights.h) and its forward pass, straight-line code over the Backend ops.
#pragma once

#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "model/causal_lm.h"
#include "model/decoder/decoder_weights.h"
#include "model/model_registry.h"

namespace nanovllm {

class DecoderModel final : public CausalLM {
 public:
  // Rank tp.rank of a tensor-parallel group (the backend's). Checks every weight's shape
  // against the config. Intermediate tensors are dumped when NANOVLLM_DUMP_DIR is set (see
  // tensor_dump.h and decoder_model.cpp for the names).
  DecoderModel(const ModelConfig& config, DecoderWeights weights, Backend& backend,
               TensorParallel tp = {});

  const ModelConfig& config() const override { return config_; }
  AttentionDims attention_dims() const override;
  bool dumps_tensors() const override;
  void reserve(int64_t tokens, int64_t logit_rows) override;
  Tensor forward(const ForwardBatch& batch, const std::vector<LayerKVCache>& kv_cache) override;

 private:
  struct Workspace;
  struct Activations;
  // Every layer through the plain ops: any batch.
  Tensor forward_rows(const ForwardBatch& batch, const std::vector<LayerKVCache>& kv_cache,
                      const Activations& a);
  // Every layer through the backend's one-row kernels: a decode step of one sequence.
  Tensor forward_one_row(const ForwardBatch& batch, const std::vector<LayerKVCache>& kv_cache,
                         const Activations& a);
  // q/k norm, rotary, this step's K/V into the cache and attention: a.qkv -> a.attn.
  void attend(int layer, const ForwardBatch& batch, const LayerKVCache& cache,
              const Activations& a);
  // A sparse layer's MLP in place on a.h: the router's choice of experts for each row, and
  // their weighted outputs. Given `next_norm` (the next layer's input norm or the final one),
  // it adds them to a.residual and leaves their norm in a.h, as add_rms_norm would, and
  // returns true; it declines (false) where the output must stay apart: over several ranks
  // (the all-reduce comes first) and while tensors are dumped.
  bool experts(int layer, const Activations& a, const Tensor& next_norm);

  ModelConfig config_;
  DecoderShard shard_;
  DecoderWeights weights_;
  Backend& backend_;
  bool dense_mlp_ = false;  // whether any layer has the dense MLP (not experts)
  OneRowKernels one_row_;   // what the backend's one-row kernels serve at this model's widths
  // Activations, grown on demand; the cos/sin table for rotary embedding.
  std::shared_ptr<Workspace> workspace_;
};

// The ModelArchitecture hooks every family of the decoder shares.
void check_decoder_split(const ModelConfig& config, int ranks);
std::unique_ptr<CausalLM> load_decoder(const ModelConfig& config, const WeightSource& weights,
                                       Backend& backend, TensorParallel tp);

}  // namespace nanovllm
