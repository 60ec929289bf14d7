// config.json of a Qwen3 checkpoint, read with transformers' Qwen3Config semantics and
// rejecting every option this engine does not implement rather than computing something else.
#include "model/model_config.h"

#include <climits>
#include <cmath>
#include <optional>
#include <string>

#include "core/check.h"
#include "model/json_file.h"

namespace nanovllm {
namespace {

using nlohmann::json;

// Typed access to the fields of one config file; every error names the file and the field.
class ConfigFields {
 public:
  ConfigFields(const json& root, std::filesystem::path file) : root_(root), file_(std::move(file)) {
    if (!root_.is_object()) fail("", "the file must hold a JSON object");
  }

  bool present(const std::string& name) const { return root_.contains(name); }

  // The field, or nullptr when it is absent or null (transformers treats both as "not set").
  const json* find(const std::string& name) const {
    auto it = root_.find(name);
    if (it == root_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    if (field.empty()) throw Error(fmt::format("{}: {}", file_.string(), problem));
    throw Error(fmt::format("{}: field '{}' {}", file_.string(), field, problem));
  }

  int positive_int(const std::string& name, std::optional<int> fallback = std::nullopt) const {
    const json* value = find(name);
    if (value == nullptr) {
      if (fallback) return *fallback;
      fail(name, "is required (a positive integer) but missing");
    }
    return positive_int_value(name, *value);
  }

  int positive_int_value(const std::string& name, const json& value) const {
    // Parsed non-negative integers are unsigned, negative ones signed.
    const bool positive = value.is_number_unsigned()
                              ? value.get<uint64_t>() > 0
                              : value.is_number_integer() && value.get<int64_t>() > 0;
    if (!positive) {
      fail(name, fmt::format("must be a positive integer, got {}", json_excerpt(value)));
    }
    if (value.get<uint64_t>() > INT_MAX) {
      fail(name, fmt::format("is too large ({}; at most 2^31 - 1)", json_excerpt(value)));
    }
    return value.get<int>();
  }

  double positive_number(const std::string& name, const json& value) const {
    if (!value.is_number() || !(value.get<double>() > 0.0) || !std::isfinite(value.get<double>())) {
      fail(name, fmt::format("must be a positive number, got {}", json_excerpt(value)));
    }
    return value.get<double>();
  }

  bool boolean(const std::string& name, bool fallback) const {
    const json* value = find(name);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) {
      fail(name, fmt::format("must be true or false, got {}", json_excerpt(*value)));
    }
    return value->get<bool>();
  }

  std::string string(const std::string& name, const std::string& fallback) const {
    const json* value = find(name);
    if (value == nullptr) return fallback;
    if (!value->is_string()) {
      fail(name, fmt::format("must be a string, got {}", json_excerpt(*value)));
    }
    return value->get<std::string>();
  }

 private:
  const json& root_;
  std::filesystem::path file_;
};

DType parse_torch_dtype(const ConfigFields& fields, const std::string& name,
                        const std::string& text) {
  if (text == "bfloat16") return DType::kBF16;
  if (text == "float16") return DType::kF16;
  if (text == "float32") return DType::kF32;
  fields.fail(name,
              fmt::format("must be \"bfloat16\", \"float16\" or \"float32\", got \"{}\"", text));
}

// Checks one rope dict (rope_scaling or rope_parameters) for options other than plain RoPE and
// returns the rope_theta it carries, if any.
std::optional<double> check_rope_dict(const ConfigFields& fields, const std::string& name) {
  const json* dict = fields.find(name);
  if (dict == nullptr) return std::nullopt;
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
    if (!it->is_string() || it->get<std::string>() != "default") {
      fields.fail(
          name + "." + type_key,
          fmt::format("is {}; only \"default\" RoPE (no scaling) is supported", json_excerpt(*it)));
    }
  }
  auto factor = dict->find("partial_rotary_factor");
  if (factor != dict->end() && !factor->is_null() &&
      !(factor->is_number() && factor->get<double>() == 1.0)) {
    fields.fail(
        name + ".partial_rotary_factor",
        fmt::format("is {}; only full-dimension RoPE (1.0) is supported", json_excerpt(*factor)));
  }
  auto theta = dict->find("rope_theta");
  if (theta == dict->end() || theta->is_null()) return std::nullopt;
  return fields.positive_number(name + ".rope_theta", *theta);
}

// rope_theta as transformers resolves it: the effective rope dict (rope_scaling when set,
// otherwise rope_parameters) wins over the top-level field, which wins over 10000.
double resolve_rope_theta(const ConfigFields& fields) {
  const std::optional<double> from_scaling = check_rope_dict(fields, "rope_scaling");
  const std::optional<double> from_parameters = check_rope_dict(fields, "rope_parameters");
  const json* scaling = fields.find("rope_scaling");
  const bool scaling_is_effective = scaling != nullptr && !scaling->empty();
  if (scaling_is_effective && from_scaling) return *from_scaling;
  if (!scaling_is_effective && from_parameters) return *from_parameters;
  if (const json* top = fields.find("rope_theta"))
    return fields.positive_number("rope_theta", *top);
  return 10000.0;
}

std::vector<int> parse_token_ids(const ConfigFields& fields, const std::string& name,
                                 const json& value) {
  auto as_id = [&](const json& item) {
    if (!item.is_number_integer() || item.get<int64_t>() < 0 || item.get<int64_t>() > INT_MAX) {
      fields.fail(name, fmt::format("must be a token id or a list of token ids, got {}",
                                    json_excerpt(value)));
    }
    return item.get<int>();
  };
  std::vector<int> ids;
  if (value.is_array()) {
    for (const json& item : value) ids.push_back(as_id(item));
  } else {
    ids.push_back(as_id(value));
  }
  return ids;
}

void reject_unsupported_options(const ConfigFields& fields) {
  if (fields.boolean("use_sliding_window", false)) {
    fields.fail("use_sliding_window", "is true; sliding-window attention is not supported");
  }
  if (fields.boolean("attention_bias", false)) {
    fields.fail("attention_bias", "is true; attention projections with bias are not supported");
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

}  // namespace

ModelConfig load_model_config(const std::filesystem::path& model_dir) {
  const std::filesystem::path file = model_dir / "config.json";
  const json root = read_json_file(file);
  const ConfigFields fields(root, file);

  ModelConfig config;
  config.model_type = fields.string("model_type", "");
  if (config.model_type.empty()) fields.fail("model_type", "is required but missing");
  if (config.model_type != "qwen3") {
    fields.fail("model_type",
                fmt::format("is \"{}\"; only \"qwen3\" models are supported", config.model_type));
  }
  reject_unsupported_options(fields);

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
  // transformers' Qwen3Config defaults head_dim to 128, not hidden / heads; every Qwen3 model
  // uses 128, and the weight shape checks catch a checkpoint that disagrees.
  config.head_dim = fields.positive_int("head_dim", 128);
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
  config.rope_theta = resolve_rope_theta(fields);
  config.tie_word_embeddings = fields.boolean("tie_word_embeddings", false);

  // Newer transformers write "dtype"; older ones "torch_dtype".
  for (const char* name : {"dtype", "torch_dtype"}) {
    if (fields.find(name) == nullptr) continue;
    config.torch_dtype = parse_torch_dtype(fields, name, fields.string(name, ""));
    break;
  }
  if (const json* eos = fields.find("eos_token_id")) {
    config.eos_token_ids = parse_token_ids(fields, "eos_token_id", *eos);
  }
  return config;
}

GenerationConfig load_generation_config(const std::filesystem::path& model_dir,
                                        const ModelConfig& config) {
  const std::filesystem::path file = model_dir / "generation_config.json";
  GenerationConfig generation;
  generation.eos_token_ids = config.eos_token_ids;
  std::error_code ignored;
  if (!std::filesystem::exists(file, ignored)) return generation;

  const json root = read_json_file(file);
  const ConfigFields fields(root, file);
  if (const json* eos = fields.find("eos_token_id")) {
    generation.eos_token_ids = parse_token_ids(fields, "eos_token_id", *eos);
  }
  return generation;
}

}  // namespace nanovllm
