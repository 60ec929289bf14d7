#include "model/json_file.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/json_input.h"

namespace nanovllm {

nlohmann::json parse_json_strict(std::string_view text, const std::filesystem::path& source) {
  // One set of seen keys per open object; arrays hold no keys, so the innermost open object
  // is always the owner of the next key.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto track_keys = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth) {
      throw Error(fmt::format("{}: invalid JSON: it nests deeper than {} levels, the limit",
                              source.string(), kMaxJsonDepth));
    }
    if (event == Event::object_start) {
      open_objects.emplace_back();
    } else if (event == Event::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Event::key && !open_objects.empty() && duplicate.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second) duplicate = key;
    }
    return true;
  };
  nlohmann::json result;
  try {
    result = nlohmann::json::parse(text.begin(), text.end(), track_keys);
  } catch (const nlohmann::json::exception& error) {
    // The parser quotes the offending input, which may be arbitrary bytes: keep messages ASCII.
    std::string message = error.what();
    for (char& c : message) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    }
    throw Error(fmt::format("{}: invalid JSON: {}", source.string(), message));
  }
  if (!duplicate.empty()) {
    throw Error(fmt::format("{}: invalid JSON: key \"{}\" appears twice in one object",
                            source.string(), duplicate));
  }
  return result;
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    throw Error(fmt::format("{}: is a directory, not a file", path.string()));
  }
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw Error(fmt::format("{}: cannot open file", path.string()));
  std::ostringstream contents;
  contents << stream.rdbuf();
  if (stream.bad()) throw Error(fmt::format("{}: read failed", path.string()));
  return parse_json_strict(contents.str(), path);
}

}  // namespace nanovllm
