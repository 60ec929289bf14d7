// config.json of a dense-decoder checkpoint (Qwen3, Qwen2, Llama), read with transformers'
// semantics for the family's config class, rejecting every option this engine does not
// implement rather than computing something else.
#include <climits>
#include <optional>
#include <string>

#include "core/check.h"
#include "core/json_input.h"
#include "model/decoder/decoder_config.h"

namespace nanovllm {
namespace {

using nlohmann::json;

// What one rope dict (rope_scaling or rope_parameters) holds.
struct RopeDict {
  std::optional<double> theta;
  RopeScaling scaling;
};

// A field the llama3 rope dict must have.
const json& required(const ConfigFields& fields, const std::string& dict_name, const json& dict,
                     const char* key) {
  auto it = dict.find(key);
  if (it == dict.end() || it->is_null()) {
    fields.fail(dict_name + "." + key, "is required for rope_type \"llama3\" but missing");
  }
  return *it;
}

// Checks one rope dict for options other than plain RoPE (and, where the family has it,
// llama3 scaling) and returns what it carries.
RopeDict check_rope_dict(const ConfigFields& fields, const std::string& name,
                         const DecoderFamily& family) {
  RopeDict rope;
  const json* dict = fields.find(name);
  if (dict == nullptr) return rope;
  if (!dict->is_object()) {
    fields.fail(name, fmt::format("must be an object or null, got {}", json_excerpt(*dict)));
  }
  for (const auto& [key, value] : dict->items()) {
    if (value.is_object()) {
      fields.fail(name + "." + key,
                  "holds per-layer-type RoPE parameters, which are not supported");
    }
  }
  for (const char* type_key : {"rope_type", "type"}) {
    auto it = dict->find(type_key);
    if (it == dict->end() || it->is_null()) continue;
    const std::string type = it->is_string() ? it->get<std::string>() : "";
    if (type == "llama3" && family.llama3_rope) {
      rope.scaling.enabled = true;
      continue;
    }
    if (type != "default") {
      fields.fail(name + "." + type_key,
                  fmt::format("is {}; only \"default\" RoPE (no scaling){} is supported",
                              json_excerpt(*it), family.llama3_rope ? " or \"llama3\"" : ""));
    }
  }
  if (rope.scaling.enabled) {
    const auto number = [&](const char* key) {
      return fields.positive_number(name + "." + key, required(fields, name, *dict, key));
    };
    rope.scaling.factor = number("factor");
    rope.scaling.low_freq_factor = number("low_freq_factor");
    rope.scaling.high_freq_factor = number("high_freq_factor");
    if (rope.scaling.high_freq_factor <= rope.scaling.low_freq_factor) {
      fields.fail(name + ".high_freq_factor",
                  fmt::format("({}) must exceed low_freq_factor ({})",
                              rope.scaling.high_freq_factor, rope.scaling.low_freq_factor));
    }
    rope.scaling.original_max_position_embeddings = fields.positive_int_value(
        name + ".original_max_position_embeddings",
        required(fields, name, *dict, "original_max_position_embeddings"));
  }
  auto factor = dict->find("partial_rotary_factor");
  if (factor != dict->end() && !factor->is_null() &&
      !(factor->is_number() && factor->get<double>() == 1.0)) {
    fields.fail(
        name + ".partial_rotary_factor",
        fmt::format("is {}; only full-dimension RoPE (1.0) is supported", json_excerpt(*factor)));
  }
  auto theta = dict->find("rope_theta");
  if (theta != dict->end() && !theta->is_null()) {
    rope.theta = fields.positive_number(name + ".rope_theta", *theta);
  }
  return rope;
}

// rope_theta and the scaling as transformers resolves them: the effective rope dict
// (rope_scaling when set, otherwise rope_parameters) wins over the top-level rope_theta, which
// wins over 10000.
void resolve_rope(const ConfigFields& fields, const DecoderFamily& family, ModelConfig& config) {
  const RopeDict from_scaling = check_rope_dict(fields, "rope_scaling", family);
  const RopeDict from_parameters = check_rope_dict(fields, "rope_parameters", family);
  const json* scaling = fields.find("rope_scaling");
  const bool scaling_is_effective = scaling != nullptr && !scaling->empty();
  const RopeDict& effective = scaling_is_effective ? from_scaling : from_parameters;
  config.rope_scaling = effective.scaling;
  if (effective.theta) {
    config.rope_theta = *effective.theta;
  } else if (const json* top = fields.find("rope_theta")) {
    config.rope_theta = fields.positive_number("rope_theta", *top);
  } else {
    config.rope_theta = 10000.0;
  }
}

void reject_unsupported_options(const ConfigFields& fields) {
  if (fields.boolean("use_sliding_window", false)) {
    fields.fail("use_sliding_window", "is true; sliding-window attention is not supported");
  }
  if (fields.boolean("attention_bias", false)) {
    fields.fail("attention_bias",
                "is true; biases on every attention projection are not supported");
  }
  if (fields.boolean("mlp_bias", false)) {
    fields.fail("mlp_bias", "is true; MLP projections with bias are not supported");
  }
  const std::string activation = fields.string("hidden_act", "silu");
  if (activation != "silu") {
    fields.fail("hidden_act", fmt::format("is \"{}\"; only \"silu\" is supported", activation));
  }
  if (fields.find("quantization_config") != nullptr) {
    fields.fail("quantization_config", "is set; quantized checkpoints are not supported");
  }
  if (const json* layer_types = fields.find("layer_types")) {
    if (!layer_types->is_array()) {
      fields.fail("layer_types", fmt::format("must be a list, got {}", json_excerpt(*layer_types)));
    }
    for (const json& type : *layer_types) {
      if (type != "full_attention") {
        fields.fail("layer_types", fmt::format("contains {}; only \"full_attention\" is supported",
                                               json_excerpt(type)));
      }
    }
  }
}

// Qwen3MoeConfig's expert fields. The sizes are required (transformers would fill in
// Qwen3-30B-A3B's); the layer pattern defaults as transformers defaults it.
MixtureOfExperts read_experts(const ConfigFields& fields, int layers) {
  MixtureOfExperts moe;
  // The Hub's configs say num_experts, transformers 5 writes num_local_experts.
  const char* experts_name = fields.present("num_experts") ? "num_experts" : "num_local_experts";
  if (!fields.present(experts_name)) {
    fields.fail("num_experts", "is required (or num_local_experts) but missing");
  }
  moe.experts = fields.positive_int(experts_name);
  moe.experts_per_token = fields.positive_int("num_experts_per_tok");
  if (moe.experts_per_token > moe.experts) {
    fields.fail("num_experts_per_tok",
                fmt::format("({}) exceeds the {} experts", moe.experts_per_token, moe.experts));
  }
  moe.expert_intermediate = fields.positive_int("moe_intermediate_size");
  if (2 * int64_t{moe.expert_intermediate} > INT_MAX) {
    fields.fail("moe_intermediate_size", fmt::format("is too large ({})", moe.expert_intermediate));
  }
  moe.normalize_weights = fields.boolean("norm_topk_prob", false);
  moe.sparse_step = fields.positive_int("decoder_sparse_step", 1);
  if (const json* dense = fields.find("mlp_only_layers")) {
    if (!dense->is_array()) {
      fields.fail("mlp_only_layers", fmt::format("must be a list, got {}", json_excerpt(*dense)));
    }
    for (const json& layer : *dense) {
      if (!layer.is_number_integer() || layer.get<int64_t>() < 0 ||
          layer.get<int64_t>() >= layers) {
        fields.fail("mlp_only_layers", fmt::format("holds {}, not a layer index in [0, {})",
                                                   json_excerpt(layer), layers));
      }
      moe.dense_layers.push_back(layer.get<int>());
    }
  }
  return moe;
}

}  // namespace

ModelConfig read_decoder_config(const ConfigFields& fields, const DecoderFamily& family) {
  ModelConfig config;
  config.model_type = fields.string("model_type", "");
  if (config.model_type.empty()) fields.fail("model_type", "is required but missing");
  if (config.model_type != family.model_type) {
    fields.fail("model_type", fmt::format("is \"{}\"; {} needs \"{}\"", config.model_type,
                                          family.architecture, family.model_type));
  }
  reject_unsupported_options(fields);
  config.qk_norm = family.qk_norm;
  config.qkv_bias = family.qkv_bias;

  config.vocab_size = fields.positive_int("vocab_size");
  config.hidden_size = fields.positive_int("hidden_size");
  config.intermediate_size = fields.positive_int("intermediate_size");
  config.num_hidden_layers = fields.positive_int("num_hidden_layers");
  config.num_attention_heads = fields.positive_int("num_attention_heads");
  // transformers fills an absent size with Qwen3-8B's value; a config that omits one describes
  // some other model, so sizes are required here. A null num_key_value_heads means one kv head
  // per query head, as in transformers.
  if (!fields.present("num_key_value_heads")) {
    fields.fail("num_key_value_heads", "is required (a positive integer, or null) but missing");
  }
  config.num_key_value_heads =
      fields.positive_int("num_key_value_heads", config.num_attention_heads);
  // transformers' Qwen3Config defaults head_dim to 128 (every Qwen3 model uses it), the others
  // to hidden / heads; the weight shape checks catch a checkpoint that disagrees.
  if (family.default_head_dim > 0) {
    config.head_dim = fields.positive_int("head_dim", family.default_head_dim);
  } else {
    if (config.hidden_size % config.num_attention_heads != 0 && !fields.present("head_dim")) {
      fields.fail("head_dim", fmt::format("is missing, and hidden_size {} does not split over {} "
                                          "heads",
                                          config.hidden_size, config.num_attention_heads));
    }
    config.head_dim =
        fields.positive_int("head_dim", config.hidden_size / config.num_attention_heads);
  }
  config.max_position_embeddings = fields.positive_int("max_position_embeddings");
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    fields.fail("num_attention_heads",
                fmt::format("({}) must be a multiple of num_key_value_heads ({})",
                            config.num_attention_heads, config.num_key_value_heads));
  }
  // Merged projections index rows with int: keep their row counts representable.
  const int64_t qkv_rows =
      (int64_t{config.num_attention_heads} + 2 * int64_t{config.num_key_value_heads}) *
      config.head_dim;
  if (qkv_rows > INT_MAX) {
    fields.fail("head_dim", fmt::format("makes the qkv projection too large ({} rows)", qkv_rows));
  }
  if (2 * int64_t{config.intermediate_size} > INT_MAX) {
    fields.fail("intermediate_size", fmt::format("is too large ({})", config.intermediate_size));
  }

  if (const json* eps = fields.find("rms_norm_eps")) {
    config.rms_norm_eps = fields.positive_number("rms_norm_eps", *eps);
  }
  resolve_rope(fields, family, config);
  if (family.experts) config.moe = read_experts(fields, config.num_hidden_layers);
  config.tie_word_embeddings = fields.boolean("tie_word_embeddings", false);

  config.torch_dtype = fields.torch_dtype();
  if (const json* eos = fields.find("eos_token_id")) {
    config.eos_token_ids = fields.token_ids("eos_token_id", *eos);
  }
  return config;
}

}  // namespace nanovllm
