// Opening the --input / --output files of the JSON-lines commands ("-" = stdin / stdout).
#pragma once

#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <string>

namespace nanovllm {

class JsonLinesIO {
 public:
  // Throws Error naming a file that cannot be opened. An empty input path opens nothing.
  JsonLinesIO(const std::string& input_path, const std::string& output_path);

  std::istream& in() { return input_path_ == "-" ? std::cin : input_file_; }
  // Writes and flushes one compact JSON object per line; invalid UTF-8 is replaced. Throws
  // Error when the output cannot be written (e.g. a full disk).
  void write(const nlohmann::ordered_json& row);

 private:
  std::string input_path_;
  std::string output_path_;
  std::ifstream input_file_;
  std::ofstream output_file_;
};

}  // namespace nanovllm
