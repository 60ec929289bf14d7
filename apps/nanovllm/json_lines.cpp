#include "nanovllm/json_lines.h"

#include "core/check.h"

namespace nanovllm {

JsonLinesIO::JsonLinesIO(const std::string& input_path, const std::string& output_path)
    : input_path_(input_path), output_path_(output_path) {
  if (!input_path_.empty() && input_path_ != "-") {
    input_file_.open(input_path_);
    if (!input_file_) throw Error(fmt::format("cannot open input file '{}'", input_path_));
  }
  if (output_path_ != "-") {
    output_file_.open(output_path_);
    if (!output_file_) throw Error(fmt::format("cannot open output file '{}'", output_path_));
  }
}

void JsonLinesIO::write(const nlohmann::ordered_json& row) {
  std::ostream& out = output_path_ == "-" ? std::cout : output_file_;
  out << row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  out.flush();
  if (!out) throw Error(fmt::format("cannot write to output '{}'", output_path_));
}

}  // namespace nanovllm
