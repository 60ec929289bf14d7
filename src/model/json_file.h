// Reading the JSON files of a checkpoint with errors that name the file.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <string_view>

#include "core/json_input.h"

namespace nanovllm {

// Parses `text` as JSON; a syntax error, nesting deeper than kMaxJsonDepth or a key repeated within
// one object (which a plain parse would silently collapse) is an Error naming `source`.
nlohmann::json parse_json_strict(std::string_view text, const std::filesystem::path& source);

// Reads and parses a whole file with parse_json_strict; a missing or unreadable file is an Error
// naming it.
nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace nanovllm
