// Which files make up a checkpoint, and the cross-checks between a shard index and its shards.
#include <set>

#include "core/check.h"
#include "model/json_file.h"
#include "model/safetensors.h"

namespace nanovllm {
namespace {

using nlohmann::json;

// Shards live next to the index; refuse names that would reach elsewhere.
bool is_plain_relative(const std::filesystem::path& name) {
  if (name.empty() || name.is_absolute()) return false;
  for (const auto& part : name) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::filesystem::path& model_dir) {
  std::error_code ignored;
  const std::filesystem::path single = model_dir / kSingleFileName;
  if (std::filesystem::exists(single, ignored)) {
    SafetensorsCheckpoint checkpoint;
    checkpoint.source_ = single;
    checkpoint.files_.push_back(std::make_unique<SafetensorsFile>(single));
    for (const auto& [name, tensor] : checkpoint.files_.back()->tensors()) {
      checkpoint.tensors_.emplace(name, &tensor);
    }
    return checkpoint;
  }
  const std::filesystem::path index = model_dir / kIndexFileName;
  if (std::filesystem::exists(index, ignored)) return open_sharded(index);
  throw Error(fmt::format("{}: no {} or {} in this directory", model_dir.string(), kSingleFileName,
                          kIndexFileName));
}

SafetensorsCheckpoint SafetensorsCheckpoint::open_sharded(const std::filesystem::path& index_path) {
  const json index = read_json_file(index_path);
  auto fail = [&](const std::string& problem) -> void {
    throw Error(fmt::format("{}: {}", index_path.string(), problem));
  };
  if (!index.is_object()) fail("must hold a JSON object");
  auto weight_map = index.find("weight_map");
  if (weight_map == index.end()) fail("missing 'weight_map'");
  if (!weight_map->is_object()) {
    fail(fmt::format("'weight_map' must map tensor names to shard files, got {}",
                     json_excerpt(*weight_map)));
  }
  if (weight_map->empty()) fail("'weight_map' lists no tensors");

  // Shard file name -> the tensors the index puts there.
  std::map<std::string, std::set<std::string>> shard_contents;
  for (const auto& [name, shard] : weight_map->items()) {
    if (!shard.is_string() || !is_plain_relative(shard.get<std::string>())) {
      fail(fmt::format("weight_map entry '{}' must name a shard file in this directory, got {}",
                       name, json_excerpt(shard)));
    }
    shard_contents[shard.get<std::string>()].insert(name);
  }

  SafetensorsCheckpoint checkpoint;
  checkpoint.source_ = index_path;
  const std::filesystem::path dir = index_path.parent_path();
  // Which shard holds each name, to report a tensor stored in two shards.
  std::map<std::string, std::string> found_in;
  for (const auto& [shard_name, listed] : shard_contents) {
    const std::filesystem::path shard_path = dir / shard_name;
    std::error_code ignored;
    if (!std::filesystem::exists(shard_path, ignored)) {
      fail(fmt::format("shard '{}' listed in weight_map does not exist ({})", shard_name,
                       shard_path.string()));
    }
    checkpoint.files_.push_back(std::make_unique<SafetensorsFile>(shard_path));
    const SafetensorsFile& file = *checkpoint.files_.back();
    for (const std::string& name : listed) {
      if (file.find(name) == nullptr) {
        fail(fmt::format("tensor '{}' is mapped to shard '{}', which does not contain it", name,
                         shard_name));
      }
    }
    for (const auto& [name, tensor] : file.tensors()) {
      auto [previous, inserted] = found_in.emplace(name, shard_name);
      if (!inserted) {
        fail(fmt::format("tensor '{}' is stored in two shards, '{}' and '{}'", name,
                         previous->second, shard_name));
      }
      if (listed.count(name) == 0) {
        auto mapped = weight_map->find(name);
        if (mapped == weight_map->end()) {
          fail(fmt::format("shard '{}' holds tensor '{}', which weight_map does not list",
                           shard_name, name));
        }
        fail(fmt::format("tensor '{}' is stored in shard '{}' but weight_map maps it to '{}'", name,
                         shard_name, mapped->get<std::string>()));
      }
      checkpoint.tensors_.emplace(name, &tensor);
    }
  }
  return checkpoint;
}

const SafetensorsTensor* SafetensorsCheckpoint::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

}  // namespace nanovllm
